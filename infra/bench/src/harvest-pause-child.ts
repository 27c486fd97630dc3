/**
 * One process of `bench:harvest-pause`, started pinned to the benchmark's core. "inference" serves ResNet-18
 * requests of batch 1, one at a time from a FIFO queue, at Poisson arrivals it generates itself, and (when told
 * to) stops the best-effort process with SIGSTOP while a request computes and continues it with SIGCONT once its
 * queue has been empty for a while. "best-effort" runs ResNet-18 on batches of `batch` in a loop and remembers
 * when each batch ended.
 *
 *   node harvest-pause-child.js inference | best-effort <batch>
 */
// infra/bench does not depend on @infergrid/models as a package; its built output is used as the backend worker runs it.
import { HarvestGate } from "@infergrid/fapes";
import { createModelRuntime, type ModelRuntime, type TensorValue } from "@infergrid/models";
import { processCpuMs, selfCpuMs } from "./cpu-meter.js";

/** Parent to the inference process: run one open loop. */
export interface RunMessage {
  type: "run";
  ratePerSec: number;
  warmupMs: number;
  durationMs: number;
  /** The best-effort process, when there is one. */
  bePid: number | null;
  /** SIGSTOP the best-effort process while requests compute. */
  pause: boolean;
  resumeAfterMs: number;
  seed: number;
}

/** The inference process's answer to a RunMessage. Times are epoch ms (performance.timeOrigin + now). */
export interface RunResult {
  type: "result";
  /** Queueing + compute of each request that arrived in the measured window. */
  latenciesMs: number[];
  computeMs: number[];
  stops: number;
  conts: number;
  windowStart: number;
  windowEnd: number;
  /** CPU each process used over the measured window. */
  cpuInferenceMs: number;
  cpuBeMs: number | null;
}

/** The best-effort process's answer to { type: "report" }: when each batch ended (epoch ms). */
export interface Completions {
  type: "completions";
  at: number[];
}

export type ChildMessage = { type: "ready" } | RunResult | Completions;

const epochMs = () => performance.timeOrigin + performance.now();

function isRun(m: unknown): m is RunMessage {
  return typeof m === "object" && m !== null && (m as { type?: unknown }).type === "run";
}

function isReport(m: unknown): m is { type: "report" } {
  return typeof m === "object" && m !== null && (m as { type?: unknown }).type === "report";
}

function send(m: ChildMessage): void {
  process.send?.(m);
}

/** mulberry32: the same arrivals in every mode for the same seed. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

async function loadModel(batch: number): Promise<{ model: ModelRuntime; inputs: Record<string, TensorValue> }> {
  const model = createModelRuntime({ kind: "onnx", model: "resnet18", intraOpThreads: 1, maxBatch: batch });
  await model.load();
  const random = seeded(batch);
  const data = new Float32Array(batch * 3 * 224 * 224);
  for (let i = 0; i < data.length; i++) data[i] = random() * 2 - 1;
  const inputs = { input: { dims: [batch, 3, 224, 224], data } };
  await model.infer(inputs);
  return { model, inputs };
}

async function bestEffort(batch: number): Promise<void> {
  const { model, inputs } = await loadModel(batch);
  const at: number[] = [];
  process.on("message", (m: unknown) => {
    if (isReport(m)) send({ type: "completions", at });
  });
  send({ type: "ready" });
  for (;;) {
    await model.infer(inputs);
    at.push(epochMs());
  }
}

async function inference(): Promise<void> {
  const { model, inputs } = await loadModel(1);
  for (let i = 0; i < 3; i++) await model.infer(inputs);
  let bePid: number | null = null;
  let stopped = false;
  // However this process ends, the best-effort process is not left stopped (it could not see its parent go).
  process.on("exit", () => {
    if (stopped && bePid !== null) {
      try {
        process.kill(bePid, "SIGCONT");
      } catch {}
    }
  });
  // The first read runs getconf; done here, not in the measured window.
  processCpuMs(process.pid);

  const run = (r: RunMessage) =>
    new Promise<RunResult>((done, failed) => {
      bePid = r.bePid;
      const be = r.bePid;
      const random = seeded(r.seed);
      const arrivals: number[] = [];
      for (let t = -Math.log(1 - random()) * (1000 / r.ratePerSec); t < r.warmupMs + r.durationMs; ) {
        arrivals.push(t);
        t += -Math.log(1 - random()) * (1000 / r.ratePerSec);
      }
      const queue: number[] = [];
      const latenciesMs: number[] = [];
      const computeMs: number[] = [];
      let next = 0;
      let busy = false;
      let stops = 0;
      let conts = 0;
      let resumeTimer: NodeJS.Timeout | undefined;
      let windowDone = false;
      const start = performance.now() + 10;
      const measureFrom = start + r.warmupMs;
      const result: RunResult = {
        type: "result",
        latenciesMs,
        computeMs,
        stops: 0,
        conts: 0,
        windowStart: 0,
        windowEnd: 0,
        cpuInferenceMs: 0,
        cpuBeMs: be === null ? null : 0,
      };

      const finishIfDone = () => {
        if (!(windowDone && next === arrivals.length && queue.length === 0 && !busy)) return;
        clearTimeout(resumeTimer);
        if (stopped && be !== null) {
          process.kill(be, "SIGCONT");
          stopped = false;
          conts++;
        }
        done({ ...result, stops, conts });
      };

      // The system's own gate decides when the best-effort process stops and continues (no item is ever given up here).
      const gated = r.pause && be !== null;
      const gate = new HarvestGate(performance.now(), { resumeAfterMs: r.resumeAfterMs, abandonAfterMs: Number.MAX_SAFE_INTEGER });
      const check = () => {
        resumeTimer = undefined;
        if (gate.check(performance.now()) === "resume" && be !== null) {
          process.kill(be, "SIGCONT");
          stopped = false;
          conts++;
        }
        schedule();
      };
      const schedule = () => {
        clearTimeout(resumeTimer);
        const due = gate.nextCheckMs();
        resumeTimer =
          due === undefined || due >= Number.MAX_SAFE_INTEGER ? undefined : setTimeout(check, Math.max(0, due - performance.now()));
      };

      const startNext = () => {
        const arrived = queue.shift();
        if (arrived === undefined) {
          finishIfDone();
          return;
        }
        busy = true;
        if (gated && gate.computeStarts(performance.now())) {
          process.kill(be, "SIGSTOP");
          stopped = true;
          stops++;
        }
        model.infer(inputs).then((answer) => {
          busy = false;
          if (gated) {
            gate.computeEnds(performance.now());
            schedule();
          }
          if (arrived >= measureFrom) {
            latenciesMs.push(performance.now() - arrived);
            computeMs.push(answer.computeMs);
          }
          startNext();
        }, failed);
      };

      // Arrivals are timed from their schedule: a late timer (a busy core) is part of the request's latency.
      const tick = () => {
        const now = performance.now();
        while (next < arrivals.length && start + (arrivals[next] ?? 0) <= now + 0.5) {
          queue.push(start + (arrivals[next] ?? 0));
          next++;
        }
        if (!busy) startNext();
        const due = arrivals[next];
        if (due !== undefined) setTimeout(tick, Math.max(0, start + due - performance.now()));
      };
      const snapshot = () => ({ at: epochMs(), self: selfCpuMs(), be: be === null ? 0 : processCpuMs(be) });
      let first = snapshot();
      setTimeout(() => {
        first = snapshot();
      }, measureFrom - performance.now());
      setTimeout(
        () => {
          const last = snapshot();
          result.windowStart = first.at;
          result.windowEnd = last.at;
          result.cpuInferenceMs = last.self - first.self;
          if (be !== null) result.cpuBeMs = last.be - first.be;
          windowDone = true;
          finishIfDone();
        },
        measureFrom + r.durationMs - performance.now(),
      );
      if (arrivals.length > 0) setTimeout(tick, Math.max(0, start + (arrivals[0] ?? 0) - performance.now()));
    });

  process.on("message", (m: unknown) => {
    if (isRun(m)) {
      run(m).then(send, (err: unknown) => {
        console.error(`harvest-pause inference: ${err instanceof Error ? err.message : String(err)}`);
        process.exit(1);
      });
    }
  });
  send({ type: "ready" });
}

// Gone with the benchmark, however it ended.
process.on("disconnect", () => process.exit(0));
const [role, batch] = process.argv.slice(2);
const main = role === "best-effort" ? bestEffort(Number(batch)) : role === "inference" ? inference() : undefined;
if (!main) {
  console.error(`harvest-pause child: unknown role ${JSON.stringify(role)}`);
  process.exit(2);
}
main.catch((err: unknown) => {
  console.error(`harvest-pause ${role}: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
