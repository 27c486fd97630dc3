import { connect } from "@nats-io/transport-node";
import { describe, expect, it } from "vitest";
import { startNatsServer } from "./nats-server.js";

describe("startNatsServer", () => {
  it("starts a real server, survives a kill and restart on the same port", async () => {
    await using server = await startNatsServer();
    expect(server.port).toBeGreaterThan(0);
    const nc = await connect({ servers: server.url });
    expect(nc.getServer()).toContain(String(server.port));
    await nc.close();
    const port = server.port;
    await server.kill();
    await server.restart();
    expect(server.port).toBe(port);
    const nc2 = await connect({ servers: server.url });
    await nc2.close();
  });
});
