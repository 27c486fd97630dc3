import { setTimeout as sleepTimer } from "node:timers/promises";
import { type Lognormal, type Random, sampleLognormal, standardNormal, systemRandom } from "@infergrid/core";
import { batchOf, drawServiceMs, type LatencyProfile } from "@infergrid/kairos";
import { processingMs, type ThemisProfile } from "@infergrid/themis";
import { checkTensorShape } from "./tensor.js";
import { type InferResult, InvalidModelInputError, ModelNotLoadedError, type ModelRuntime, type TensorValue } from "./types.js";

export type Sleep = (ms: number) => Promise<void>;

export interface EmulatedModelOptions {
  name?: string;
  /** Service time per request in ms (scipy parameterisation). */
  profile: Lognormal;
  /**
   * This instance type's service time against batch size (Kairos's profiles): when given, a request's
   * service time is drawn from it at the request's batch (its inputs' first dimension) instead of `profile`.
   */
  batchProfile?: LatencyProfile;
  /**
   * Themis's l(b, c): when given, a batch of b rows (the inputs' first dimension, summed over a batch's
   * requests) on `cores` cores takes l(b, c) ms, times lognormal noise of mean 1 and log-sd `spread` if > 0.
   * It takes precedence over `batchProfile` and `profile`.
   */
  themis?: ThemisLatency;
  /** Cores it runs on at first (default 1); resize() changes them in place. */
  cores?: number;
  coldStartMs: number;
  random?: Random;
  sleep?: Sleep;
}

export interface ThemisLatency extends ThemisProfile {
  /** Log-sd of multiplicative lognormal noise of mean 1 (0 or absent: none). */
  spread?: number;
}

/** One request's answer in a batch: its result, or why its inputs were refused (the others still run). */
export type BatchItemResult = InferResult | InvalidModelInputError;

const defaultSleep: Sleep = (ms) => sleepTimer(ms);

/**
 * Stands in for a real model with the paper's measured latency profile. It sleeps instead of computing,
 * so many emulated replicas can share a small machine without disturbing each other's timings.
 *
 * Output: `{ y: { dims: [1], data: [t] } }` where t is the drawn service time in ms, which is also the
 * reported computeMs (the intended time, so results do not depend on timer overshoot).
 */
export class EmulatedModel implements ModelRuntime {
  readonly name: string;
  private readonly profile: Lognormal;
  private readonly batchProfile: LatencyProfile | undefined;
  private readonly themis: ThemisLatency | undefined;
  private coreCount: number;
  private readonly coldStartMs: number;
  private readonly random: Random;
  private readonly sleep: Sleep;
  private loading: Promise<{ coldStartMs: number }> | undefined;
  private loaded = false;

  constructor(options: EmulatedModelOptions) {
    const { profile, coldStartMs } = options;
    if (!(profile.scale >= 0 && profile.loc >= 0 && profile.shape >= 0)) {
      throw new RangeError(`emulated profile needs non-negative shape, loc and scale, got ${JSON.stringify(profile)}`);
    }
    if (!(coldStartMs >= 0)) throw new RangeError(`coldStartMs must be >= 0, got ${coldStartMs}`);
    const t = options.themis;
    if (t !== undefined && ![t.gamma, t.eps, t.delta, t.eta, t.spread ?? 0].every((x) => Number.isFinite(x) && x >= 0)) {
      throw new RangeError(`themis profile needs finite non-negative gamma, eps, delta, eta and spread, got ${JSON.stringify(t)}`);
    }
    this.themis = t === undefined ? undefined : { ...t };
    this.coreCount = EmulatedModel.checkCores(options.cores ?? 1);
    this.name = options.name ?? "emulated";
    this.profile = { ...profile };
    this.batchProfile = options.batchProfile;
    this.coldStartMs = coldStartMs;
    this.random = options.random ?? systemRandom;
    this.sleep = options.sleep ?? defaultSleep;
  }

  load(): Promise<{ coldStartMs: number }> {
    this.loading ??= (async () => {
      await this.pause(this.coldStartMs);
      this.loaded = true;
      return { coldStartMs: this.coldStartMs };
    })();
    return this.loading;
  }

  get cores(): number {
    return this.coreCount;
  }

  /** Takes effect for the next inference; an emulated model has no session to rebuild, so it costs nothing. */
  async resize(cores: number): Promise<{ resizeMs: number }> {
    this.coreCount = EmulatedModel.checkCores(cores);
    return { resizeMs: 0 };
  }

  async infer(inputs: Record<string, TensorValue>): Promise<InferResult> {
    if (!this.loaded) throw new ModelNotLoadedError(`model "${this.name}" is not loaded`);
    for (const [inputName, tensor] of Object.entries(inputs)) checkTensorShape(inputName, tensor);
    const serviceMs = this.themis === undefined ? this.drawServiceMs(inputs) : this.themisMs(this.themis, rowsOf(inputs));
    await this.pause(serviceMs);
    return { outputs: { y: { dims: [1], data: [serviceMs] } }, computeMs: serviceMs };
  }

  /**
   * Several requests as one batch: one sleep of the batch's service time, and each request answered with it
   * (as infer() does for one). A request whose inputs are malformed gets its error and is left out. The time:
   * l(b, c) with a Themis profile (b: all rows); the Kairos profile at all rows; otherwise the sum of one draw
   * per request (a lognormal profile says nothing about batching, so a batch saves nothing).
   */
  async inferBatch(batch: readonly Record<string, TensorValue>[]): Promise<BatchItemResult[]> {
    if (!this.loaded) throw new ModelNotLoadedError(`model "${this.name}" is not loaded`);
    const answers: (BatchItemResult | undefined)[] = batch.map((inputs) => {
      try {
        for (const [inputName, tensor] of Object.entries(inputs)) checkTensorShape(inputName, tensor);
        return undefined;
      } catch (err) {
        if (err instanceof InvalidModelInputError) return err;
        throw err;
      }
    });
    const valid = batch.filter((_, i) => answers[i] === undefined);
    let serviceMs = 0;
    if (this.themis !== undefined)
      serviceMs = this.themisMs(
        this.themis,
        valid.reduce((n, inputs) => n + rowsOf(inputs), 0),
      );
    else if (this.batchProfile !== undefined) {
      const rows = valid.reduce((n, inputs) => n + rowsOf(inputs), 0);
      serviceMs = drawServiceMs(this.batchProfile, rows, standardNormal(this.random));
    } else for (const inputs of valid) serviceMs += this.drawServiceMs(inputs);
    if (valid.length > 0) await this.pause(serviceMs);
    return answers.map((a) => a ?? { outputs: { y: { dims: [1], data: [serviceMs] } }, computeMs: serviceMs });
  }

  async unload(): Promise<void> {
    this.loaded = false;
    this.loading = undefined;
  }

  private drawServiceMs(inputs: Record<string, TensorValue>): number {
    if (this.batchProfile !== undefined) {
      const batch = batchOf(Object.values(inputs).map((t) => t.dims));
      return drawServiceMs(this.batchProfile, batch, standardNormal(this.random));
    }
    // A zero scale is a constant time: no draw, so the zero-time benchmark path touches no randomness.
    if (this.profile.scale === 0) return this.profile.loc;
    return Math.max(0, sampleLognormal(this.random, this.profile));
  }

  private themisMs(p: ThemisLatency, rows: number): number {
    const ms = processingMs(p, rows, this.coreCount);
    const spread = p.spread ?? 0;
    // exp(sigma*z - sigma^2/2) has mean 1: the noise spreads the time without moving its mean.
    return spread > 0 ? ms * Math.exp(spread * standardNormal(this.random) - (spread * spread) / 2) : ms;
  }

  private static checkCores(cores: number): number {
    if (!(Number.isInteger(cores) && cores >= 1)) throw new RangeError(`cores must be an integer >= 1, got ${cores}`);
    return cores;
  }

  private async pause(ms: number): Promise<void> {
    // Even a 0 ms timer yields to the event loop for a macrotask; the zero-time path must not pay that.
    if (ms > 0) await this.sleep(ms);
  }
}

/** A request's rows: its inputs' first dimension (1 without inputs). */
function rowsOf(inputs: Record<string, TensorValue>): number {
  return batchOf(Object.values(inputs).map((t) => t.dims));
}
