import { createServer, type Server, type Socket, connect as tcpConnect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bytesMethod } from "./bytes-method.js";
import { type GrpcServerHandle, grpc, startGrpcServer, statusOf, unaryCall } from "./grpc.js";
import { H2Channel, type UnaryChannel } from "./h2-channel.js";
import { addServiceWithMultiplex, MultiplexChannel } from "./multiplex.js";

/**
 * A peer that dies without a word: a container SIGKILLed takes its network namespace with it, so no RST ever
 * reaches the caller, and the connection's packets go unanswered until TCP's retransmissions (seconds apart)
 * or keepalive (10 s + 5 s) notice. Meanwhile the pod is back at the same address. The request path's channels
 * must not keep sending calls into the dead connection: a call that times out on a connection that said
 * nothing since the call went out makes the channel probe it, and a probe left unanswered drops it.
 *
 * The dead connection is a TCP proxy between channel and server that stops forwarding (both ways) without
 * closing anything; connections made after it "restarts" are forwarded again.
 */
const Echo = { Echo: bytesMethod("/test.Echo/Echo"), Slow: bytesMethod("/test.Echo/Slow") };
const logger = { debug: () => undefined } as unknown as Parameters<typeof addServiceWithMultiplex>[3];
const H2 = {
  maxReceiveMessageBytes: 1024 * 1024,
  keepaliveMs: 10_000,
  keepaliveTimeoutMs: 5_000,
  initialBackoffMs: 100,
  maxBackoffMs: 200,
};

class SilentProxy {
  private readonly server: Server;
  private readonly live = new Set<{ silent: boolean; a: Socket; b: Socket }>();
  /** New connections: forwarded, or accepted and never answered. */
  accept: "forward" | "silent" = "forward";
  port = 0;
  /** Connections accepted so far. */
  connections = 0;

  constructor(private readonly target: number) {
    this.server = createServer((a) => {
      this.connections += 1;
      const b = tcpConnect(this.target, "127.0.0.1");
      const pair = { silent: this.accept === "silent", a, b };
      this.live.add(pair);
      a.on("data", (d) => pair.silent || b.write(d));
      b.on("data", (d) => pair.silent || a.write(d));
      const end = () => {
        this.live.delete(pair);
        a.destroy();
        b.destroy();
      };
      a.on("close", end).on("error", end);
      b.on("close", end).on("error", end);
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    const address = this.server.address();
    this.port = typeof address === "object" && address ? address.port : 0;
    return this;
  }

  /** Every open connection goes silent, both ways, and stays open. */
  die(): void {
    for (const p of this.live) p.silent = true;
  }

  async stop(): Promise<void> {
    for (const p of this.live) {
      p.a.destroy();
      p.b.destroy();
    }
    await new Promise((r) => this.server.close(r));
  }
}

let server: GrpcServerHandle;

beforeAll(async () => {
  server = await startGrpcServer({
    host: "127.0.0.1",
    port: 0,
    register: (s) =>
      addServiceWithMultiplex(
        s,
        Echo,
        {
          Echo: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, call.request),
          Slow: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
            setTimeout(() => cb(null, call.request), 800);
          },
        },
        logger,
      ),
  });
});

afterAll(async () => {
  await server?.shutdown(100);
});

const echo = (ch: UnaryChannel, body: string, timeoutMs: number, m = Echo.Echo) =>
  unaryCall(ch, m, Buffer.from(body), { deadline: Date.now() + timeoutMs });

/** Calls every 100 ms with a 300 ms deadline (as a frontend retries a backend after its cooldown) until one is answered. */
async function recoveryMs(ch: UnaryChannel, limitMs: number): Promise<number> {
  const t0 = Date.now();
  while (Date.now() - t0 < limitMs) {
    const ok = await echo(ch, "again", 300).then(
      () => true,
      () => false,
    );
    if (ok) return Date.now() - t0;
    await new Promise((r) => setTimeout(r, 100));
  }
  return Number.POSITIVE_INFINITY;
}

const channels: [string, (address: string, probeTimeoutMs?: number) => UnaryChannel][] = [
  ["H2Channel (unary calls)", (a, probeTimeoutMs) => new H2Channel(a, { ...H2, probeTimeoutMs })],
  [
    "MultiplexChannel (calls over one stream)",
    (a, probeTimeoutMs) => new MultiplexChannel(a, { unary: new H2Channel(a, H2), maxStreamedBytes: 64 * 1024, probeTimeoutMs }),
  ],
];

/** A channel through a fresh proxy to the server, one answered call on it; both closed after `body`, even when it fails. */
async function throughProxy(
  make: (address: string, probeTimeoutMs?: number) => UnaryChannel,
  body: (ch: UnaryChannel, proxy: SilentProxy) => Promise<void>,
  probeTimeoutMs?: number,
): Promise<void> {
  const proxy = await new SilentProxy(server.port).start();
  const ch = make(`127.0.0.1:${proxy.port}`, probeTimeoutMs);
  try {
    expect((await echo(ch, "up", 2000)).toString()).toBe("up");
    await body(ch, proxy);
  } finally {
    ch.close();
    await proxy.stop();
  }
}

describe.each(channels)("%s, when its peer dies silently", (name, make) => {
  it("drops the dead connection after the first call that times out on it, and reaches the restarted peer within a second", async () => {
    await throughProxy(make, async (ch, proxy) => {
      proxy.die();
      const dead = await echo(ch, "into the void", 300).catch((e: unknown) => e);
      expect(statusOf(dead).code).toBe(grpc.status.DEADLINE_EXCEEDED);
      // The pod is back at the same address; the old connection still swallows everything.
      const took = await recoveryMs(ch, 12_000);
      console.log(`${name}: answered again ${took} ms after the first timed-out call`);
      expect(took).toBeLessThan(2_000);
    });
  });

  it("fails a call with a far deadline UNAVAILABLE within about two seconds of the peer's death, so the caller can fail over", async () => {
    await throughProxy(make, async (ch, proxy) => {
      proxy.die();
      const t0 = Date.now();
      // The broker gives a frontend the client's whole deadline: waiting it out would leave no time to fail over.
      const err = await echo(ch, "into the void", 10_000).catch((e: unknown) => e);
      const took = Date.now() - t0;
      console.log(`${name}: a call with 10 s to go failed ${grpc.status[statusOf(err).code]} after ${took} ms`);
      expect(statusOf(err).code).toBe(grpc.status.UNAVAILABLE);
      // Outstanding 1 s in silence, checked every 0.5 s, then 1 s for the probe's answer.
      expect(took).toBeLessThan(3_000);
      expect((await echo(ch, "elsewhere", 2000)).toString()).toBe("elsewhere");
    });
  });

  it("fails a call sent after the death UNAVAILABLE within about two seconds even while an older call, answered around, is still outstanding", async () => {
    await throughProxy(make, async (ch, proxy) => {
      // In a multiplexed session the oldest call in flight was usually sent before the last answer heard: it says
      // nothing of the connection. The call to watch is the first one sent since the session last said anything.
      const older = echo(ch, "older", 10_000, Echo.Slow).catch((e: unknown) => e);
      expect((await echo(ch, "answered after it", 2000)).toString()).toBe("answered after it");
      proxy.die();
      const t0 = Date.now();
      const err = await echo(ch, "into the void", 10_000).catch((e: unknown) => e);
      const took = Date.now() - t0;
      console.log(
        `${name}: with an older call outstanding, a call with 10 s to go failed ${grpc.status[statusOf(err).code]} after ${took} ms`,
      );
      expect(statusOf(err).code).toBe(grpc.status.UNAVAILABLE);
      expect(took).toBeLessThan(3_000);
      expect(statusOf(await older).code).toBe(grpc.status.UNAVAILABLE);
    });
  });

  it("keeps a live connection whose peer is only slow: the probe is answered, and the slow call's answer is not lost to a reconnect", async () => {
    // The probe must be answered within 200 ms, well before the second slow call's answer (800 ms) would show the
    // connection alive: a probe left unanswered would drop the connection and fail that call.
    await throughProxy(
      make,
      async (ch, proxy) => {
        // Times out at 300 ms while the handler takes 800 ms; the connection said nothing meanwhile, so it is probed.
        const slow = await echo(ch, "slow-1", 300, Echo.Slow).catch((e: unknown) => e);
        expect(statusOf(slow).code).toBe(grpc.status.DEADLINE_EXCEEDED);
        // A second slow call sent right after is answered on the same, probed-and-kept connection.
        const kept = await echo(ch, "slow-2", 3000, Echo.Slow);
        expect(kept.toString()).toBe("slow-2");
        expect(proxy.connections).toBe(1);
      },
      200,
    );
  });
});
