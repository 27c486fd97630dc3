/**
 * A hostile client, as its own process so that its work never weighs on the measuring clients' event loop:
 * for --duration-ms it sends the broker requests it must refuse, at fixed rates, each encoded once:
 * - many tensors: 10,000 tiny inputs in about 200 KB, under the size cap, refused by their count;
 * - oversized gRPC: a 5 MiB message, over the broker's 4 MiB cap;
 * - oversized HTTP: a 5 MiB JSON body.
 * It prints one JSON line: for each kind, how many answers ended with each code (gRPC status name, HTTP
 * status, or "cut off: <error>" when the connection was closed while it was still sending).
 *
 *   node libs/testkit/dist/hostile-client.js --grpc 127.0.0.1:50051 --http http://127.0.0.1:8080 --service svc
 */
import { parseArgs } from "node:util";
import { InferenceServiceDefinition, inference } from "@infergrid/proto";
import { createClient, grpc, isServiceError } from "@infergrid/runtime";

export type FloodCounts = Record<"manyTensors" | "oversizedGrpc" | "oversizedHttp", Record<string, number>>;

const { values: args } = parseArgs({
  options: {
    grpc: { type: "string" },
    http: { type: "string" },
    service: { type: "string", default: "svc" },
    "duration-ms": { type: "string", default: "5000" },
    "many-tensors-per-sec": { type: "string", default: "100" },
    "oversized-per-sec": { type: "string", default: "5" },
  },
});

function encoded(req: inference.InferRequest.$Properties): Buffer {
  return Buffer.from(inference.InferRequest.encode(req).finish());
}

function count(into: Record<string, number>, code: string): void {
  into[code] = (into[code] ?? 0) + 1;
}

/** Calls `send` at perSec for durationMs (catching up when a tick comes late), then waits for every answer. */
async function flood(perSec: number, durationMs: number, send: () => Promise<void>): Promise<void> {
  if (perSec <= 0) return;
  const inFlight: Promise<void>[] = [];
  const started = Date.now();
  const tick = () => {
    const due = Math.min(durationMs, Date.now() - started) * (perSec / 1000);
    while (inFlight.length < due) inFlight.push(send());
  };
  const timer = setInterval(tick, 10);
  await new Promise((r) => setTimeout(r, durationMs));
  clearInterval(timer);
  tick();
  await Promise.all(inFlight);
}

async function main(): Promise<void> {
  if (!args.grpc || !args.http) throw new Error("--grpc <host:port> and --http <url> are required");
  const service = args.service;
  const durationMs = Number(args["duration-ms"]);
  const tiny = { dims: [1], data: [1] };
  const manyTensors = encoded({ service, inputs: Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`x${i}`, tiny])) });
  const oversized = encoded({ service, inputs: { x: { dims: [1_310_720], data: new Array<number>(1_310_720).fill(0) } } });
  const oversizedJson = Buffer.from(JSON.stringify({ service, padding: "x".repeat(5 * 1024 * 1024) }));

  const client = createClient(args.grpc);
  const counts: FloodCounts = { manyTensors: {}, oversizedGrpc: {}, oversizedHttp: {} };
  const raw = (body: Buffer, into: Record<string, number>) => () =>
    new Promise<void>((resolve) => {
      client.makeUnaryRequest(
        InferenceServiceDefinition.Infer.path,
        (b: Buffer) => b,
        (b: Buffer) => b,
        body,
        new grpc.Metadata(),
        { deadline: Date.now() + 10_000 },
        (err) => {
          count(into, err ? (isServiceError(err) ? grpc.status[err.code] : String(err)) : "OK");
          resolve();
        },
      );
    });
  const post = (body: Buffer, into: Record<string, number>) => () =>
    fetch(`${args.http}/v1/infer`, { method: "POST", headers: { "content-type": "application/json" }, body }).then(
      async (res) => {
        await res.arrayBuffer();
        count(into, String(res.status));
      },
      (err: unknown) => count(into, `cut off: ${String((err as { cause?: unknown }).cause ?? err)}`),
    );
  await Promise.all([
    flood(Number(args["many-tensors-per-sec"]), durationMs, raw(manyTensors, counts.manyTensors)),
    flood(Number(args["oversized-per-sec"]), durationMs, raw(oversized, counts.oversizedGrpc)),
    flood(Number(args["oversized-per-sec"]), durationMs, post(oversizedJson, counts.oversizedHttp)),
  ]);
  client.close();
  process.stdout.write(`${JSON.stringify(counts)}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`${String(err)}\n`);
  process.exit(1);
});
