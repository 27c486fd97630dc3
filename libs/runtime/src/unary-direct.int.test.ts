import http2 from "node:http2";
import { backend, type DecodedExecuteRequest, executeRequestDeserialize } from "@infergrid/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bytesMethod } from "./bytes-method.js";
import { type GrpcServerHandle, grpc, startGrpcServer, statusOf } from "./grpc.js";
import { H2Channel } from "./h2-channel.js";
import { CLAIMED_BYTES_BUDGET, serveUnaryDirect, unaryDirectPoolStats } from "./unary-direct.js";

/**
 * The direct path against grpc-js itself: the same handlers on a server with and without it, called with grpc-js's
 * client, the request path's H2Channel and raw HTTP/2, must give the same answers, statuses, messages and trailing
 * metadata. Then what only the direct path does: pooled bodies that are not reused while their call runs.
 */
const method = (name: string) => bytesMethod(`/test.Direct/${name}`);
const Echo = method("Echo");
const Fail = method("Fail");
const Slow = method("Slow");
const Hold = method("Hold");
const MAX = 1536 * 1024;

const cancelled: string[] = [];
const handlers: Record<string, grpc.handleUnaryCall<Buffer, Buffer>> = {
  Echo: (call, cb) => {
    const md = new grpc.Metadata();
    md.set("x-peer-seen", call.getPeer().includes(":") ? "yes" : "no");
    const deadline = call.getDeadline();
    md.set("x-deadline", deadline === Number.POSITIVE_INFINITY ? "none" : "set");
    cb(null, Buffer.concat([Buffer.from(`${String(call.metadata.get("x-who")[0] ?? "")}:`), call.request]), md);
  },
  Fail: (_call, cb) => {
    const md = new grpc.Metadata();
    md.set("x-infergrid-retry-after-ms", "250");
    cb({ code: grpc.status.UNAVAILABLE, details: "busy: 100 % ünicode, retry", metadata: md });
  },
  Slow: (call, cb) => {
    call.on("cancelled", () => cancelled.push(call.request.toString()));
    setTimeout(() => cb(null, call.request), 1_000);
  },
  // Holds its request while other calls arrive, then says whether its bytes are still all its first byte's.
  Hold: (call, cb) => {
    setTimeout(() => {
      const first = call.request[0] ?? 0;
      const intact = call.request.every((b) => b === first);
      cb(intact ? null : { code: grpc.status.DATA_LOSS, details: "request changed under its call" }, Buffer.from([first]));
    }, 30);
  },
};

/** The backend's Execute as it decodes (lent arrays on the direct path), answering with what its handler saw. */
const Tensor: grpc.MethodDefinition<backend.ExecuteRequest.$Properties, Buffer> = {
  path: "/test.Direct/Tensor",
  requestStream: false,
  responseStream: false,
  requestSerialize: (m) => Buffer.from(backend.ExecuteRequest.encode(m).finish()),
  requestDeserialize: executeRequestDeserialize as unknown as (b: Buffer) => backend.ExecuteRequest.$Properties,
  responseSerialize: (b) => b,
  responseDeserialize: (b) => b,
};
/**
 * Holds its tensor while other calls arrive, then answers "<first value> <intact> <lent>": whether every value is
 * still its first, and whether the array is a view of a larger (pooled) buffer.
 */
const tensorHandler: grpc.handleUnaryCall<DecodedExecuteRequest, Buffer> = (call, cb) => {
  const data = call.request.inputs.x?.data ?? new Float32Array();
  setTimeout(() => {
    const first = data[0] ?? Number.NaN;
    const intact = data.every((v) => v === first);
    const lent = data.byteLength < data.buffer.byteLength;
    cb(null, Buffer.from(`${first} ${intact} ${lent}`));
  }, 30);
};

function register(direct: boolean) {
  return (server: grpc.Server) => {
    const service = { Echo, Fail, Slow, Hold };
    server.addService(service, handlers);
    server.addService({ Tensor }, { Tensor: tensorHandler } as unknown as grpc.UntypedServiceImplementation);
    if (direct) {
      for (const [name, m] of Object.entries(service))
        serveUnaryDirect(server, m, handlers[name] as grpc.handleUnaryCall<Buffer, Buffer>, { pooled: true });
      serveUnaryDirect(server, Tensor as unknown as grpc.MethodDefinition<DecodedExecuteRequest, Buffer>, tensorHandler, { pooled: true });
    }
  };
}

let grpcJs: GrpcServerHandle;
let direct: GrpcServerHandle;
const clients: grpc.Client[] = [];
const channels: H2Channel[] = [];

beforeAll(async () => {
  grpcJs = await startGrpcServer({ host: "127.0.0.1", port: 0, maxReceiveMessageBytes: MAX, register: register(false) });
  direct = await startGrpcServer({ host: "127.0.0.1", port: 0, maxReceiveMessageBytes: MAX, register: register(true) });
});

afterAll(async () => {
  for (const c of clients) c.close();
  for (const c of channels) c.close();
  await Promise.all([grpcJs?.shutdown(100), direct?.shutdown(100)]);
});

type Caller = "grpc-js" | "h2";
function client(server: GrpcServerHandle, kind: Caller, options: grpc.ChannelOptions = {}): grpc.Client | H2Channel {
  if (kind === "h2") {
    const ch = new H2Channel(server.address, {
      maxReceiveMessageBytes: 4 * 1024 * 1024,
      keepaliveMs: 10_000,
      keepaliveTimeoutMs: 5_000,
      initialBackoffMs: 100,
      maxBackoffMs: 500,
    });
    channels.push(ch);
    return ch;
  }
  const c = new grpc.Client(server.address, grpc.credentials.createInsecure(), options);
  clients.push(c);
  return c;
}

interface Outcome {
  code: grpc.status;
  details: string;
  body?: string;
  metadata: Record<string, unknown>;
}

async function outcome(promise: Promise<Buffer>): Promise<Outcome> {
  try {
    const body = await promise;
    return {
      code: grpc.status.OK,
      details: "",
      body: body.length > 64 ? `${body.length} bytes of ${body[0]}` : body.toString(),
      metadata: {},
    };
  } catch (err) {
    const s = statusOf(err);
    const md = Object.fromEntries(Object.entries(s.metadata.getMap()).filter(([k]) => k.startsWith("x-")));
    return { code: s.code, details: s.details, metadata: md };
  }
}

/** One call and what came back, trailing metadata of an OK answer included. */
function callWith(
  c: grpc.Client | H2Channel,
  m: grpc.MethodDefinition<Buffer, Buffer>,
  body: Buffer,
  md = new grpc.Metadata(),
  deadlineMs = 5_000,
) {
  let trailing: Record<string, unknown> = {};
  const p = new Promise<Buffer>((resolve, reject) => {
    const call = c.makeUnaryRequest(
      m.path,
      m.requestSerialize,
      m.responseDeserialize,
      body,
      md,
      { deadline: Date.now() + deadlineMs },
      (err, value) => (err ? reject(err) : resolve(value ?? Buffer.alloc(0))),
    );
    if ("on" in call && typeof call.on === "function")
      call.on("status", (s: grpc.StatusObject) => {
        trailing = Object.fromEntries(Object.entries(s.metadata.getMap()).filter(([k]) => k.startsWith("x-")));
      });
  });
  return outcome(p).then((o) => (o.code === grpc.status.OK ? { ...o, metadata: trailing } : o));
}

describe("the direct path answers as grpc-js does", () => {
  const who = new grpc.Metadata();
  who.set("x-who", "ana");
  const cases: Array<[string, grpc.MethodDefinition<Buffer, Buffer>, () => Buffer, grpc.Metadata]> = [
    ["an answer, with the caller's metadata, peer and deadline seen", Echo, () => Buffer.from("hello"), who],
    ["an empty request", Echo, () => Buffer.alloc(0), new grpc.Metadata()],
    ["a request over 64 KiB (pooled)", Echo, () => Buffer.alloc(600 * 1024, 7), who],
    ["a status with its message and trailing metadata", Fail, () => Buffer.from("x"), new grpc.Metadata()],
    ["a request over the size limit", Echo, () => Buffer.alloc(2 * 1024 * 1024, 1), new grpc.Metadata()],
  ];
  for (const kind of ["grpc-js", "h2"] as const) {
    for (const [what, m, body, md] of cases) {
      it(`${what} (${kind} client)`, async () => {
        const [viaGrpcJs, viaDirect] = await Promise.all([
          callWith(client(grpcJs, kind), m, body(), md),
          callWith(client(direct, kind), m, body(), md),
        ]);
        expect(viaDirect).toEqual(viaGrpcJs);
      });
    }
  }

  it("says the expected things in those cases (so that equal is not equally wrong)", async () => {
    const c = client(direct, "grpc-js");
    expect(await callWith(c, Echo, Buffer.from("hello"), who)).toMatchObject({
      code: grpc.status.OK,
      body: "ana:hello",
      metadata: { "x-peer-seen": "yes", "x-deadline": "set" },
    });
    expect(await callWith(c, Fail, Buffer.from("x"))).toEqual({
      code: grpc.status.UNAVAILABLE,
      details: "busy: 100 % ünicode, retry",
      metadata: { "x-infergrid-retry-after-ms": "250" },
    });
    const big = await callWith(c, Echo, Buffer.alloc(2 * 1024 * 1024, 1));
    expect(big.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(big.details).toContain("larger than max");
  });

  it("the deadline, for both servers: DEADLINE_EXCEEDED", async () => {
    for (const server of [grpcJs, direct]) {
      const o = await callWith(client(server, "h2"), Slow, Buffer.from("late"), new grpc.Metadata(), 150);
      expect(o.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    }
  });

  it("a client's cancellation reaches the handler", async () => {
    const before = cancelled.length;
    const c = client(direct, "grpc-js");
    const call = c.makeUnaryRequest(
      Slow.path,
      Slow.requestSerialize,
      Slow.responseDeserialize,
      Buffer.from("cancel-me"),
      new grpc.Metadata(),
      {},
      () => {},
    );
    await new Promise((r) => setTimeout(r, 100));
    call.cancel();
    await expect.poll(() => cancelled.slice(before), { timeout: 2_000 }).toContain("cancel-me");
  });

  it("a gzip-compressed request goes to grpc-js, and is answered", async () => {
    const c = client(direct, "grpc-js", { "grpc.default_compression_algorithm": 2 });
    expect(await callWith(c, Echo, Buffer.from("zipped"), who)).toMatchObject({ code: grpc.status.OK, body: "ana:zipped" });
  });

  it("a method it was not given stays grpc-js's (health)", async () => {
    direct.health.setStatus("", "SERVING");
    const c = client(direct, "grpc-js");
    const Check: grpc.MethodDefinition<Buffer, Buffer> = { ...method("x"), path: "/grpc.health.v1.Health/Check" };
    // HealthCheckRequest{service: ""} is empty; SERVING is field 1 = 1.
    expect(await callWith(c, Check, Buffer.alloc(0))).toMatchObject({ code: grpc.status.OK, body: "\u0008\u0001" });
  });

  const raw = (server: GrpcServerHandle, headers: http2.OutgoingHttpHeaders, body: Buffer | undefined, path = Echo.path) =>
    new Promise<{ status: string; message: string }>((resolve, reject) => {
      const session = http2.connect(`http://${server.address}`);
      session.on("error", reject);
      const stream = session.request({
        ":method": "POST",
        ":path": path,
        "content-type": "application/grpc",
        te: "trailers",
        ...headers,
      });
      let got: http2.IncomingHttpHeaders = {};
      stream.on("response", (h) => {
        got = h;
      });
      stream.on("trailers", (t) => {
        got = { ...got, ...t };
      });
      stream.on("error", () => {});
      stream.on("close", () => {
        session.close();
        resolve({ status: String(got["grpc-status"]), message: decodeURI(String(got["grpc-message"])) });
      });
      stream.resume();
      if (body) stream.end(body);
      else stream.end();
    });
  const framed = (b: Buffer) => Buffer.concat([Buffer.from([0, 0, 0, 0, b.length]), b]);

  it("raw HTTP/2: no message, a cut message, a second message, a message and a cut prefix, a bad grpc-timeout", async () => {
    const inputs: Array<[http2.OutgoingHttpHeaders, Buffer | undefined, grpc.status]> = [
      [{}, undefined, grpc.status.UNIMPLEMENTED],
      [{}, framed(Buffer.from("abc")).subarray(0, 6), grpc.status.UNIMPLEMENTED],
      [{}, Buffer.concat([framed(Buffer.from("a")), framed(Buffer.from("b"))]), grpc.status.UNIMPLEMENTED],
      [{}, Buffer.concat([framed(Buffer.from("a")), Buffer.from([0, 0])]), grpc.status.OK],
      [{ "grpc-timeout": "soon" }, framed(Buffer.from("a")), grpc.status.INTERNAL],
      [{ "grpc-timeout": "5S" }, framed(Buffer.from("a")), grpc.status.OK],
    ];
    for (const [headers, body, code] of inputs) {
      const [a, b] = [await raw(grpcJs, headers, body), await raw(direct, headers, body)];
      expect(b).toEqual(a);
      expect(Number(b.status)).toBe(code);
    }
    // 30 days, and the longest the header can say (over 11,000 years), on a call that takes a second: a deadline
    // far off, not one already past. An int32 wraps the first negative, and a timer beyond 2^31 - 1 ms fires at
    // once: grpc-js's server answers the first DEADLINE_EXCEEDED (seen here); the direct path does not.
    for (const timeout of ["720H", "99999999H"]) {
      const b = await raw(direct, { "grpc-timeout": timeout }, framed(Buffer.from("a")), Slow.path);
      expect(Number(b.status), timeout).toBe(grpc.status.OK);
    }
  });
});

describe("beforeBody", () => {
  it("refuses a call on its headers with the status it throws, and its handler never runs; lets the others through", async () => {
    let ran = 0;
    const Keyed = method("Keyed");
    const server = await startGrpcServer({
      host: "127.0.0.1",
      port: 0,
      maxReceiveMessageBytes: MAX,
      register: (s) => {
        const handler: grpc.handleUnaryCall<Buffer, Buffer> = (call, cb) => {
          ran++;
          cb(null, call.request.subarray(0, 1));
        };
        s.addService({ Keyed }, { Keyed: handler });
        serveUnaryDirect(s, Keyed, handler, {
          pooled: true,
          beforeBody: (call) => {
            if (call.metadata.get("x-key")[0] === "k") return;
            const md = new grpc.Metadata();
            md.set("x-why", "no key");
            throw Object.assign(new Error("unused"), { code: grpc.status.UNAUTHENTICATED, details: "a key is needed", metadata: md });
          },
        });
      },
    });
    try {
      const keyed = new grpc.Metadata();
      keyed.set("x-key", "k");
      for (const kind of ["grpc-js", "h2"] as const) {
        const c = client(server, kind);
        expect(await callWith(c, Keyed, Buffer.alloc(1024 * 1024, 5))).toEqual({
          code: grpc.status.UNAUTHENTICATED,
          details: "a key is needed",
          metadata: { "x-why": "no key" },
        });
        expect(await callWith(c, Keyed, Buffer.alloc(1024 * 1024, 5), keyed)).toMatchObject({ code: grpc.status.OK, body: "\u0005" });
      }
      expect(ran).toBe(2);
    } finally {
      await server.shutdown(100);
    }
  });
});

describe("pooled bodies", () => {
  it("are not reused while their call runs, under concurrent calls", async () => {
    const c = client(direct, "h2");
    const outcomes = await Promise.all(Array.from({ length: 24 }, (_, i) => callWith(c, Hold, Buffer.alloc(200 * 1024 + i * 1000, i + 1))));
    expect(outcomes.map((o) => o.code)).toEqual(outcomes.map(() => grpc.status.OK));
    expect(outcomes.map((o) => o.body)).toEqual(outcomes.map((_, i) => String.fromCharCode(i + 1)));
  });

  it("are claimed ahead of the bytes only within the budget: clients that claim lengths and send nothing hold at most it", async () => {
    const before = unaryDirectPoolStats();
    const session = http2.connect(`http://${direct.address}`);
    try {
      const claim = Buffer.alloc(5 + 10);
      claim.writeUInt32BE(MAX, 1);
      // 60 x 1.5 MiB claimed: beyond the 64 MiB budget.
      const streams = Array.from({ length: 60 }, () => {
        const st = session.request({ ":method": "POST", ":path": Echo.path, "content-type": "application/grpc", te: "trailers" });
        st.on("error", () => {});
        st.write(claim);
        return st;
      });
      await expect.poll(() => unaryDirectPoolStats().claimedBytes, { timeout: 2_000 }).toBeGreaterThan(CLAIMED_BYTES_BUDGET - MAX);
      expect(unaryDirectPoolStats().claimedBytes).toBeLessThanOrEqual(CLAIMED_BYTES_BUDGET);
      expect(unaryDirectPoolStats().allocations - before.allocations).toBeLessThanOrEqual(Math.floor(CLAIMED_BYTES_BUDGET / MAX));
      // A call beyond the budget is still served, from what it received.
      expect((await callWith(client(direct, "h2"), Echo, Buffer.alloc(600 * 1024, 9))).body).toBe(`${600 * 1024 + 1} bytes of 58`);
      for (const st of streams) st.close();
      await expect.poll(() => unaryDirectPoolStats().claimedBytes, { timeout: 2_000 }).toBe(0);
    } finally {
      session.destroy();
    }
  });

  it("lend a decoded tensor its values, not reused while its call runs, and fresh arrays on grpc-js's path", async () => {
    const call = (server: GrpcServerHandle, fill: number, values: number) =>
      new Promise<string>((resolve, reject) =>
        client(server, "h2").makeUnaryRequest(
          Tensor.path,
          Tensor.requestSerialize,
          Tensor.responseDeserialize,
          { service: "s", inputs: { x: { dims: [values], data: new Array<number>(values).fill(fill) } } },
          new grpc.Metadata(),
          { deadline: Date.now() + 5_000 },
          (err, value) => (err ? reject(err) : resolve(String(value))),
        ),
      );
    const image = 3 * 224 * 224;
    const answers = await Promise.all(Array.from({ length: 24 }, (_, i) => call(direct, i + 0.5, image - i)));
    expect(answers).toEqual(answers.map((_, i) => `${i + 0.5} true true`));
    // Below the pooled size, and on grpc-js's server: arrays of their own.
    expect(await call(direct, 2.5, 1000)).toBe("2.5 true false");
    expect(await call(grpcJs, 3.5, image)).toBe("3.5 true false");
    const before = unaryDirectPoolStats().allocations;
    for (let i = 0; i < 10; i++) expect(await call(direct, 4.5, image)).toBe("4.5 true true");
    expect(unaryDirectPoolStats().allocations - before).toBe(0);
  });

  it("are reused: sequential image-sized calls allocate no new buffer", async () => {
    const c = client(direct, "h2");
    await callWith(c, Echo, Buffer.alloc(588 * 1024, 3));
    const before = unaryDirectPoolStats().allocations;
    for (let i = 0; i < 20; i++) expect((await callWith(c, Echo, Buffer.alloc(588 * 1024, 3))).code).toBe(grpc.status.OK);
    expect(unaryDirectPoolStats().allocations - before).toBe(0);
  });
});
