import { type Lognormal, lognormalMean, type Random, seededRandom } from "@infergrid/core";
import { describe, expect, it } from "vitest";
import { EmulatedModel } from "./emulated-model.js";
import { InvalidModelInputError, ModelNotLoadedError } from "./types.js";

const RESNET34: Lognormal = { shape: 0.3602, loc: 72.86, scale: 86.69 };

function recordingSleep(): { sleeps: number[]; sleep: (ms: number) => Promise<void> } {
  const sleeps: number[] = [];
  return { sleeps, sleep: async (ms) => void sleeps.push(ms) };
}

const noRandom: Random = {
  uniform: () => {
    throw new Error("the zero-time path must not draw");
  },
};

describe("EmulatedModel", () => {
  it("sleeps the configured cold start once, however often load is called", async () => {
    const { sleeps, sleep } = recordingSleep();
    const model = new EmulatedModel({ profile: RESNET34, coldStartMs: 1500, sleep, random: seededRandom(1) });
    expect(await model.load()).toEqual({ coldStartMs: 1500 });
    expect(await model.load()).toEqual({ coldStartMs: 1500 });
    expect(sleeps).toEqual([1500]);
  });

  it("draws service times whose mean matches the lognormal profile, and sleeps exactly each one", async () => {
    const { sleeps, sleep } = recordingSleep();
    const model = new EmulatedModel({ profile: RESNET34, coldStartMs: 0, sleep, random: seededRandom(7) });
    await model.load();
    const n = 20_000;
    let sum = 0;
    let min = Number.POSITIVE_INFINITY;
    for (let i = 0; i < n; i++) {
      const { outputs, computeMs } = await model.infer({});
      expect(outputs).toEqual({ y: { dims: [1], data: [computeMs] } });
      expect(sleeps[i]).toBe(computeMs);
      sum += computeMs;
      min = Math.min(min, computeMs);
    }
    expect(sleeps).toHaveLength(n);
    // Mean 165.4 ms, sd 34.4 ms: the standard error over 20k draws is 0.24 ms, so 1 ms is about 4 of them.
    expect(Math.abs(sum / n - lognormalMean(RESNET34))).toBeLessThan(1);
    expect(min).toBeGreaterThan(RESNET34.loc);
  });

  it("repeats its draws for the same seed", async () => {
    const draw = async (seed: number) => {
      const model = new EmulatedModel({ profile: RESNET34, coldStartMs: 0, sleep: async () => {}, random: seededRandom(seed) });
      await model.load();
      const times: number[] = [];
      for (let i = 0; i < 5; i++) times.push((await model.infer({})).computeMs);
      return times;
    };
    expect(await draw(3)).toEqual(await draw(3));
    expect(await draw(3)).not.toEqual(await draw(4));
  });

  it("returns at once with neither a sleep nor a draw for the zero-time profile", async () => {
    const { sleeps, sleep } = recordingSleep();
    const model = new EmulatedModel({ profile: { shape: 0.5, loc: 0, scale: 0 }, coldStartMs: 0, sleep, random: noRandom });
    expect(await model.load()).toEqual({ coldStartMs: 0 });
    for (let i = 0; i < 3; i++) {
      expect(await model.infer({ x: { dims: [2], data: [1, 2] } })).toEqual({ outputs: { y: { dims: [1], data: [0] } }, computeMs: 0 });
    }
    expect(sleeps).toEqual([]);
  });

  it("takes a constant time, without drawing, when the scale is 0", async () => {
    const { sleeps, sleep } = recordingSleep();
    const model = new EmulatedModel({ profile: { shape: 0.3, loc: 12.5, scale: 0 }, coldStartMs: 0, sleep, random: noRandom });
    await model.load();
    expect((await model.infer({})).computeMs).toBe(12.5);
    expect(sleeps).toEqual([12.5]);
  });

  it("waits on a timer by default instead of spinning the CPU", async () => {
    const model = new EmulatedModel({ profile: { shape: 0, loc: 200, scale: 0 }, coldStartMs: 0 });
    await model.load();
    const cpuBefore = process.cpuUsage();
    const started = performance.now();
    await model.infer({});
    const wallMs = performance.now() - started;
    const cpu = process.cpuUsage(cpuBefore);
    expect(wallMs).toBeGreaterThanOrEqual(199);
    // A busy-wait burns the whole 200 ms; a timer wait burns almost none (the rest is the process's other threads).
    expect((cpu.user + cpu.system) / 1000).toBeLessThan(100);
  });

  it("accepts any float tensors whose data length is the product of their dims", async () => {
    const model = new EmulatedModel({ profile: RESNET34, coldStartMs: 0, sleep: async () => {}, random: seededRandom(1) });
    await model.load();
    const ok = await model.infer({
      a: { dims: [2, 3], data: new Float32Array(6) },
      b: { dims: [4], data: [1, 2, 3, 4] },
      c: { dims: [0, 5], data: [] },
      d: { dims: [], data: [7] },
    });
    expect(ok.outputs.y?.dims).toEqual([1]);
  });

  it.each([
    ["a", { dims: [2, 3], data: new Float32Array(5) }, /input "a": data has 5 values but dims \[2, 3\] need 6/],
    ["b", { dims: [2, -3], data: [] }, /input "b": dims \[2, -3\] has -3/],
    ["c", { dims: [1.5], data: [1] }, /input "c": dims \[1.5\] has 1.5/],
    ["d", { dims: [1], data: "1" as unknown as number[] }, /input "d": data must be a Float32Array or an array of numbers/],
  ])("rejects input %s with a message naming it and the fault", async (inputName, tensor, message) => {
    const { sleeps, sleep } = recordingSleep();
    const model = new EmulatedModel({ profile: RESNET34, coldStartMs: 0, sleep, random: seededRandom(1) });
    await model.load();
    const attempt = model.infer({ ok: { dims: [1], data: [1] }, [inputName]: tensor });
    await expect(attempt).rejects.toThrow(InvalidModelInputError);
    await expect(attempt).rejects.toThrow(message);
    expect(sleeps).toEqual([]);
  });

  it("refuses to run before load and after unload, and loads again afterwards", async () => {
    const { sleeps, sleep } = recordingSleep();
    const model = new EmulatedModel({ profile: RESNET34, coldStartMs: 40, sleep, random: seededRandom(1) });
    await expect(model.infer({})).rejects.toThrow(ModelNotLoadedError);
    await model.load();
    await model.unload();
    await expect(model.infer({})).rejects.toThrow(ModelNotLoadedError);
    await model.load();
    await model.infer({});
    expect(sleeps.filter((ms) => ms === 40)).toHaveLength(2);
  });

  it("rejects a profile or cold start it cannot sleep", () => {
    expect(() => new EmulatedModel({ profile: { shape: 0.3, loc: -1, scale: 5 }, coldStartMs: 0 })).toThrow(RangeError);
    expect(() => new EmulatedModel({ profile: RESNET34, coldStartMs: Number.NaN })).toThrow(RangeError);
  });

  it("with a batch profile, sleeps its instance type's time at the request's batch (the inputs' first dimension)", async () => {
    const { sleeps, sleep } = recordingSleep();
    const batchProfile = {
      points: [
        { batch: 10, meanMs: 5, p99Ms: 5 },
        { batch: 100, meanMs: 30, p99Ms: 30 },
        { batch: 1000, meanMs: 250, p99Ms: 250 },
      ],
    };
    const model = new EmulatedModel({ profile: RESNET34, batchProfile, coldStartMs: 0, sleep, random: seededRandom(3) });
    await model.load();
    const tensor = (batch: number) => ({ x: { dims: [batch, 2], data: new Array<number>(2 * batch).fill(0) } });
    expect((await model.infer(tensor(8))).computeMs).toBeCloseTo(5);
    expect((await model.infer(tensor(100))).computeMs).toBeCloseTo(30);
    expect((await model.infer(tensor(101))).computeMs).toBeCloseTo(250);
    expect((await model.infer({})).computeMs).toBeCloseTo(5); // no inputs: batch 1
    expect(sleeps.map((ms) => Math.round(ms))).toEqual([5, 30, 250, 5]);
  });
});

describe("EmulatedModel with Themis's profile", () => {
  const THEMIS = { gamma: 20, eps: 10, delta: 2, eta: 3 };
  const l = (b: number, c: number) => (20 * b + 10) / c + 2 * b + 3;

  it("serves a batch of k on c cores in one sleep of l(k, c), each request answered with it", async () => {
    const { sleeps, sleep } = recordingSleep();
    const model = new EmulatedModel({ profile: RESNET34, themis: THEMIS, cores: 2, coldStartMs: 0, sleep, random: noRandom });
    await model.load();
    const answers = await model.inferBatch([{}, {}, { x: { dims: [2, 1], data: [1, 2] } }]);
    // 4 rows: two requests without inputs (1 each) and one of batch 2.
    expect(sleeps).toEqual([l(4, 2)]);
    expect(answers).toEqual(Array(3).fill({ outputs: { y: { dims: [1], data: [l(4, 2)] } }, computeMs: l(4, 2) }));
    expect((await model.infer({})).computeMs).toBe(l(1, 2));
  });

  it("resizes in place for the next batch, at no cost, and rejects a bad core count", async () => {
    const { sleeps, sleep } = recordingSleep();
    const model = new EmulatedModel({ profile: RESNET34, themis: THEMIS, coldStartMs: 0, sleep, random: noRandom });
    await model.load();
    expect(model.cores).toBe(1);
    await model.inferBatch([{}, {}]);
    expect(await model.resize(4)).toEqual({ resizeMs: 0 });
    expect(model.cores).toBe(4);
    await model.inferBatch([{}, {}]);
    expect(sleeps).toEqual([l(2, 1), l(2, 4)]);
    await expect(model.resize(0)).rejects.toThrow(RangeError);
    await expect(model.resize(1.5)).rejects.toThrow(/cores/);
  });

  it("leaves a malformed request out of the batch with its own error", async () => {
    const { sleeps, sleep } = recordingSleep();
    const model = new EmulatedModel({ profile: RESNET34, themis: THEMIS, coldStartMs: 0, sleep, random: noRandom });
    await model.load();
    const [bad, good] = await model.inferBatch([{ x: { dims: [2], data: [1] } }, {}]);
    expect(bad).toBeInstanceOf(InvalidModelInputError);
    expect(good).toEqual({ outputs: { y: { dims: [1], data: [l(1, 1)] } }, computeMs: l(1, 1) });
    expect(sleeps).toEqual([l(1, 1)]);
    // All malformed: nothing runs.
    expect((await model.inferBatch([{ x: { dims: [3], data: [] } }]))[0]).toBeInstanceOf(InvalidModelInputError);
    expect(sleeps).toHaveLength(1);
  });

  it("with a spread, draws lognormal noise of mean 1 around l(b, c)", async () => {
    const { sleep } = recordingSleep();
    const model = new EmulatedModel({
      profile: RESNET34,
      themis: { ...THEMIS, spread: 0.3 },
      coldStartMs: 0,
      sleep,
      random: seededRandom(3),
    });
    await model.load();
    const n = 20_000;
    let sum = 0;
    const seen = new Set<number>();
    for (let i = 0; i < n; i++) {
      const [r] = await model.inferBatch([{}, {}]);
      const ms = r instanceof Error ? Number.NaN : (r?.computeMs ?? Number.NaN);
      sum += ms;
      seen.add(ms);
    }
    expect(seen.size).toBeGreaterThan(n / 2);
    expect(sum / n / l(2, 1)).toBeCloseTo(1, 1);
  });

  it("rejects a profile with a negative or non-finite coefficient", () => {
    expect(() => new EmulatedModel({ profile: RESNET34, themis: { ...THEMIS, delta: -1 }, coldStartMs: 0 })).toThrow(/themis/);
    expect(() => new EmulatedModel({ profile: RESNET34, themis: { ...THEMIS, spread: Number.NaN }, coldStartMs: 0 })).toThrow(/themis/);
  });
});

describe("EmulatedModel.inferBatch without a Themis profile", () => {
  it("a lognormal profile's batch takes the sum of one draw per request (no batching gain)", async () => {
    const { sleeps, sleep } = recordingSleep();
    const model = new EmulatedModel({ profile: { shape: 0, loc: 7, scale: 0 }, coldStartMs: 0, sleep, random: noRandom });
    await model.load();
    const answers = await model.inferBatch([{}, {}, {}]);
    expect(sleeps).toEqual([21]);
    expect(answers.map((a) => (a instanceof Error ? -1 : a.computeMs))).toEqual([21, 21, 21]);
  });
});
