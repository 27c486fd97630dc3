import { setTimeout as sleepTimer } from "node:timers/promises";
import { type Lognormal, type Random, sampleLognormal, standardNormal, systemRandom } from "@infergrid/core";
import { batchOf, drawServiceMs, type LatencyProfile } from "@infergrid/kairos";
import { checkTensorShape } from "./tensor.js";
import { type InferResult, ModelNotLoadedError, type ModelRuntime, type TensorValue } from "./types.js";

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
  coldStartMs: number;
  random?: Random;
  sleep?: Sleep;
}

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

  async infer(inputs: Record<string, TensorValue>): Promise<InferResult> {
    if (!this.loaded) throw new ModelNotLoadedError(`model "${this.name}" is not loaded`);
    for (const [inputName, tensor] of Object.entries(inputs)) checkTensorShape(inputName, tensor);
    const serviceMs = this.drawServiceMs(inputs);
    await this.pause(serviceMs);
    return { outputs: { y: { dims: [1], data: [serviceMs] } }, computeMs: serviceMs };
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

  private async pause(ms: number): Promise<void> {
    // Even a 0 ms timer yields to the event loop for a macrotask; the zero-time path must not pay that.
    if (ms > 0) await this.sleep(ms);
  }
}
