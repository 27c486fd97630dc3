/**
 * The update hub on a real HTTP server and real sockets: a page whose first, full update is larger than the
 * limit on what may queue for it keeps its connection while it reads, and a page that stops reading is dropped.
 */
import { createServer, type Server, type ServerResponse } from "node:http";
import { connect, type Socket } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { createLogger } from "@infergrid/runtime";
import { afterEach, describe, expect, it } from "vitest";
import { MAX_QUEUED_BYTES, UpdateHub } from "./web.js";

const logger = createLogger("test", "console-hub", "silent");

describe("the console's update hub", () => {
  const cleanups: (() => void)[] = [];
  afterEach(() => {
    for (const c of cleanups.splice(0)) c();
  });

  async function serve(hub: UpdateHub, first: string): Promise<number> {
    const server: Server = createServer((_req, res: ServerResponse) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      hub.add(res, first);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    cleanups.push(() => {
      hub.close();
      server.closeAllConnections();
      server.close();
    });
    const address = server.address();
    if (!address || typeof address === "string") throw new Error("no port");
    return address.port;
  }

  /** A page's connection: its bytes counted, read only while `reading`. */
  function page(port: number) {
    const socket: Socket = connect(port, "127.0.0.1");
    cleanups.push(() => socket.destroy());
    const state = { received: 0, closed: false };
    socket.on("data", (chunk: Buffer) => {
      state.received += chunk.length;
    });
    socket.on("close", () => {
      state.closed = true;
    });
    socket.write("GET /api/events HTTP/1.1\r\nhost: x\r\n\r\n");
    return { socket, state };
  }

  it("keeps a page whose first update alone is over the limit, while it reads", async () => {
    const hub = new UpdateHub(10, logger);
    const first = "x".repeat(3 * MAX_QUEUED_BYTES);
    const port = await serve(hub, first);
    const { socket, state } = page(port);
    // A slow reader: a quarter of a MiB every 20 ms, with an update sent every 20 ms.
    socket.pause();
    const update = "y".repeat(1000);
    for (let i = 0; i < 400 && state.received < first.length; i++) {
      hub.broadcast(update);
      socket.resume();
      const before = state.received;
      // Near the end less than that is left to come: wait at most 200 ms for it.
      const until = Date.now() + 200;
      while (state.received - before < 256 * 1024 && !state.closed && Date.now() < until) await sleep(1);
      socket.pause();
      await sleep(20);
    }
    socket.resume();
    expect(state.closed).toBe(false);
    expect(hub.size).toBe(1);
    expect(state.received).toBeGreaterThan(first.length);
  }, 30_000);

  it("drops a page that stops reading once more than the limit queues beyond its first update", async () => {
    const hub = new UpdateHub(10, logger);
    const port = await serve(hub, "{}");
    const { socket, state } = page(port);
    await sleep(100);
    socket.pause();
    const update = "z".repeat(1024 * 1024);
    for (let i = 0; i < 64 && hub.size > 0; i++) {
      hub.broadcast(update);
      await sleep(5);
    }
    expect(hub.size).toBe(0);
    // Read on: what was queued ends, and so does the connection.
    socket.resume();
    for (let i = 0; i < 200 && !state.closed; i++) await sleep(10);
    expect(state.closed).toBe(true);
  }, 30_000);
});
