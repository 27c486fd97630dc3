/**
 * A small N-HiTS network with a Gaussian head, written by hand over Float64Arrays (forward pass,
 * backward pass and Adam), for Faro's predictor (Jeon et al., section 3.5: "Faro uses a N-HiTS [8]
 * based prediction model", "Faro incorporates the Gaussian distribution model into N-HiTS"; section
 * 5: "a 15-min arrival rate history to predict the next 7min window").
 *
 * N-HiTS (Challu et al., AAAI'23) as kept here:
 *  - stacks of MLP blocks; block b max-pools its input with kernel k_b (multi-rate input sampling),
 *    runs an MLP, and emits a backcast (subtracted from the input the next block sees: doubly
 *    residual stacking) and a few forecast knots, linearly interpolated to the horizon
 *    (hierarchical interpolation: coarse blocks produce few knots, fine blocks many);
 *  - the forecast is the sum of the blocks' interpolated outputs.
 * The Gaussian head: each block emits knots for the mean and for a pre-softplus scale; the mean per
 * step is the newest input plus the summed mean outputs (so an untrained network forecasts the
 * latest value, Faro's own cold-start rule, rather than noise), and the standard deviation is
 * softplus(summed scale outputs) + a floor. Training minimises the Gaussian negative log-likelihood.
 *
 * Inputs and targets are divided by the mean of the input window (at least `minScale`): the same
 * weights then serve a job at 30 and at 5000 requests a minute, and a level shift does not push
 * the inputs out of the range the network was trained on.
 */

import type { Random } from "@infergrid/core";

export interface NHitsConfig {
  /** Input bins (Faro: 15). */
  inputSize: number;
  /** Output steps (Faro: 7). */
  horizon: number;
  /** Hidden units per layer. */
  hidden: number;
  /** Hidden layers per block. */
  layers: number;
  /** Max-pool kernel per block, coarse to fine. */
  poolKernels: readonly number[];
  /** Forecast knots per block (interpolated to the horizon), coarse to fine. */
  knots: readonly number[];
  /** Least standard deviation in normalised units. */
  sigmaFloor: number;
  /** Least scale (input-window mean) a window is divided by. */
  minScale: number;
}

export const NHITS_DEFAULTS: NHitsConfig = {
  inputSize: 15,
  horizon: 7,
  hidden: 32,
  layers: 2,
  poolKernels: [4, 2, 1],
  knots: [2, 4, 7],
  sigmaFloor: 0.02,
  minScale: 1,
};

export interface TrainingWindow {
  input: ArrayLike<number>;
  target: ArrayLike<number>;
}

interface Layer {
  inSize: number;
  outSize: number;
  /** Offsets into the parameter vector: weights (outSize x inSize, row-major) then biases. */
  w: number;
  b: number;
}

interface Block {
  kernel: number;
  pooled: number;
  knots: number;
  layers: Layer[];
  /** Interpolation matrix, horizon x knots, row-major. */
  interp: Float64Array;
}

/**
 * One sample's activations, kept for the backward pass, and every other buffer a pass needs. Samples are run one
 * at a time, so one set per network serves them all: a training step allocated a few hundred small typed arrays
 * per batch before, which the simulator's garbage collector paid for (arrays past 64 bytes live outside V8's heap).
 */
interface Trace {
  /** Pooled input, argmax positions, and each layer's post-activation output, per block. */
  pooled: Float64Array[];
  argmax: Int32Array[];
  acts: Float64Array[][];
  /** Final pre-softplus scale and normalised mean/sigma per step. */
  preScale: Float64Array;
  mu: Float64Array;
  sigma: Float64Array;
  /** The forward pass's residual input and per-step sums. */
  residual: Float64Array;
  meanSum: Float64Array;
  scaleSum: Float64Array;
  /** A normalised input window, and the loss's gradient with respect to mu and the pre-softplus scale. */
  x: Float64Array;
  dMu: Float64Array;
  dPre: Float64Array;
  /** Backward: the gradient with respect to the residual, each block's output and each layer's input. */
  dResidual: Float64Array;
  dTheta: Float64Array[];
  dInputs: Float64Array[][];
}

const softplus = (x: number) => (x > 30 ? x : Math.log1p(Math.exp(x)));
const sigmoid = (x: number) => 1 / (1 + Math.exp(-x));

/** Linear interpolation from `knots` evenly spaced points (ends included) to `horizon` points. */
function interpolationMatrix(horizon: number, knots: number): Float64Array {
  const m = new Float64Array(horizon * knots);
  for (let h = 0; h < horizon; h++) {
    if (knots === 1) {
      m[h] = 1;
      continue;
    }
    const pos = horizon === 1 ? 0 : (h * (knots - 1)) / (horizon - 1);
    const lo = Math.min(knots - 2, Math.floor(pos));
    const frac = pos - lo;
    m[h * knots + lo] = 1 - frac;
    m[h * knots + lo + 1] = frac;
  }
  return m;
}

/**
 * Its own function, not a loop inside trainStep: V8 compiled trainStep on-stack in that loop before the lines
 * after it had run, and deoptimised it there on a third of the calls of a simulated run.
 */
function sumOfSquares(xs: Float64Array): number {
  let sum = 0;
  for (let j = 0; j < xs.length; j++) sum += xs[j]! * xs[j]!;
  return sum;
}

export class NHitsNetwork {
  readonly config: NHitsConfig;
  readonly params: Float64Array;
  private readonly grads: Float64Array;
  private readonly adamM: Float64Array;
  private readonly adamV: Float64Array;
  private readonly blocks: Block[];
  /** Offset of the global scale bias (sets the untrained network's spread). */
  private readonly scaleBias: number;
  private adamSteps = 0;
  private readonly work: Trace;

  constructor(config: Partial<NHitsConfig>, random: Random) {
    this.config = { ...NHITS_DEFAULTS, ...config };
    const { inputSize, horizon, hidden, layers, poolKernels, knots } = this.config;
    if (poolKernels.length !== knots.length || poolKernels.length === 0)
      throw new RangeError("poolKernels and knots need one entry per block");
    let size = 0;
    this.blocks = poolKernels.map((kernel, i) => {
      const k = Math.max(1, Math.min(horizon, knots[i] ?? horizon));
      const pooled = Math.ceil(inputSize / kernel);
      const sizes = [pooled, ...new Array<number>(layers).fill(hidden), inputSize + 2 * k];
      const ls: Layer[] = [];
      for (let l = 0; l + 1 < sizes.length; l++) {
        const inSize = sizes[l] ?? 0;
        const outSize = sizes[l + 1] ?? 0;
        ls.push({ inSize, outSize, w: size, b: size + inSize * outSize });
        size += inSize * outSize + outSize;
      }
      return { kernel, pooled, knots: k, layers: ls, interp: interpolationMatrix(horizon, k) };
    });
    this.scaleBias = size;
    size += 1;
    this.params = new Float64Array(size);
    this.grads = new Float64Array(size);
    this.adamM = new Float64Array(size);
    this.adamV = new Float64Array(size);
    for (const block of this.blocks) {
      block.layers.forEach((layer, l) => {
        const last = l === block.layers.length - 1;
        // He-uniform for the ReLU layers; the output layers start near zero so the untrained
        // network forecasts the latest value with the initial spread.
        const bound = last ? 0.001 : Math.sqrt(6 / layer.inSize);
        for (let j = 0; j < layer.inSize * layer.outSize; j++) this.params[layer.w + j] = (2 * random.uniform() - 1) * bound;
      });
    }
    // softplus(-1.05) = 0.3: an untrained forecast is +-30 % of the level.
    this.params[this.scaleBias] = -1.05;
    this.work = {
      pooled: this.blocks.map((b) => new Float64Array(b.pooled)),
      argmax: this.blocks.map((b) => new Int32Array(b.pooled)),
      acts: this.blocks.map((b) => b.layers.map((l) => new Float64Array(l.outSize))),
      preScale: new Float64Array(horizon),
      mu: new Float64Array(horizon),
      sigma: new Float64Array(horizon),
      residual: new Float64Array(inputSize),
      meanSum: new Float64Array(horizon),
      scaleSum: new Float64Array(horizon),
      x: new Float64Array(inputSize),
      dMu: new Float64Array(horizon),
      dPre: new Float64Array(horizon),
      dResidual: new Float64Array(inputSize),
      dTheta: this.blocks.map((b) => new Float64Array(b.layers[b.layers.length - 1]?.outSize ?? 0)),
      dInputs: this.blocks.map((b) => b.layers.map((l) => new Float64Array(l.inSize))),
    };
  }

  get parameterCount(): number {
    return this.params.length;
  }

  /** Normalised forward pass of `x` (the normalised input window) into the network's trace buffers. */
  private run(x: Float64Array): Trace {
    const { inputSize, horizon, sigmaFloor } = this.config;
    const p = this.params;
    const trace = this.work;
    const residual = trace.residual;
    residual.set(x);
    const meanSum = trace.meanSum.fill(0);
    const scaleSum = trace.scaleSum.fill(p[this.scaleBias] ?? 0);
    for (let bi = 0; bi < this.blocks.length; bi++) {
      const block = this.blocks[bi] as Block;
      const pooled = trace.pooled[bi] as Float64Array;
      const argmax = trace.argmax[bi] as Int32Array;
      for (let j = 0; j < block.pooled; j++) {
        let best = Number.NEGATIVE_INFINITY;
        let at = j * block.kernel;
        for (let i = j * block.kernel; i < Math.min(inputSize, (j + 1) * block.kernel); i++) {
          const v = residual[i] ?? 0;
          if (v > best) {
            best = v;
            at = i;
          }
        }
        pooled[j] = best;
        argmax[j] = at;
      }
      const acts = trace.acts[bi] as Float64Array[];
      let input = pooled;
      for (let l = 0; l < block.layers.length; l++) {
        const layer = block.layers[l]!;
        const { inSize, outSize, w, b } = layer;
        const out = acts[l]!;
        const relu = l < block.layers.length - 1;
        // Hot loop: plain indexing (the sizes are fixed by construction), four terms per turn (a sixth of a
        // training step saved), added one by one in the same order as one term per turn, so to the same sum.
        for (let o = 0; o < outSize; o++) {
          let s = p[b + o]!;
          const row = w + o * inSize;
          let i = 0;
          for (; i + 3 < inSize; i += 4) {
            s += p[row + i]! * input[i]!;
            s += p[row + i + 1]! * input[i + 1]!;
            s += p[row + i + 2]! * input[i + 2]!;
            s += p[row + i + 3]! * input[i + 3]!;
          }
          for (; i < inSize; i++) s += p[row + i]! * input[i]!;
          out[o] = relu && s < 0 ? 0 : s;
        }
        input = out;
      }
      const theta = input;
      for (let i = 0; i < inputSize; i++) residual[i] = (residual[i] ?? 0) - (theta[i] ?? 0);
      for (let h = 0; h < horizon; h++) {
        let m = 0;
        let s = 0;
        for (let k = 0; k < block.knots; k++) {
          const w = block.interp[h * block.knots + k] ?? 0;
          m += w * (theta[inputSize + k] ?? 0);
          s += w * (theta[inputSize + block.knots + k] ?? 0);
        }
        meanSum[h] = (meanSum[h] ?? 0) + m;
        scaleSum[h] = (scaleSum[h] ?? 0) + s;
      }
    }
    const last = x[inputSize - 1] ?? 0;
    for (let h = 0; h < horizon; h++) {
      trace.mu[h] = last + (meanSum[h] ?? 0);
      trace.preScale[h] = scaleSum[h] ?? 0;
      trace.sigma[h] = softplus(scaleSum[h] ?? 0) + sigmaFloor;
    }
    return trace;
  }

  /** Normalised mean and standard deviation per step for a normalised input window. */
  predictNormalised(x: Float64Array): { mu: Float64Array; sigma: Float64Array } {
    const t = this.run(x);
    return { mu: t.mu.slice(), sigma: t.sigma.slice() };
  }

  /** Window mean, floored: the per-window normalisation. */
  scaleOf(window: ArrayLike<number>): number {
    let s = 0;
    for (let i = 0; i < window.length; i++) s += window[i] ?? 0;
    return Math.max(this.config.minScale, s / Math.max(1, window.length));
  }

  /** Mean and standard deviation per step in the series' own units. */
  predict(window: ArrayLike<number>): { mean: number[]; std: number[] } {
    const scale = this.scaleOf(window);
    const x = this.work.x;
    for (let i = 0; i < x.length; i++) x[i] = (window[i] ?? 0) / scale;
    const { mu, sigma } = this.run(x);
    return { mean: Array.from(mu, (m) => Math.max(0, m * scale)), std: Array.from(sigma, (s) => s * scale) };
  }

  /**
   * One Adam step on a batch of (input window, target) pairs in the series' units; returns the
   * batch's mean Gaussian negative log-likelihood (normalised units, constant dropped).
   */
  trainStep(batch: readonly TrainingWindow[], learningRate: number, clipNorm = 1): number {
    const loss = this.gradient(batch);
    const norm = Math.sqrt(sumOfSquares(this.grads));
    // A spike far outside the window's level gives a huge likelihood gradient: clip so one odd
    // minute cannot undo what the network learnt.
    this.adam(learningRate, norm > clipNorm ? clipNorm / norm : 1);
    return loss;
  }

  /** The batch's mean loss; leaves its gradient in `lastGradient` (exposed for a gradient check). */
  gradient(batch: readonly TrainingWindow[]): number {
    const { inputSize, horizon } = this.config;
    this.grads.fill(0);
    let loss = 0;
    const { x, dMu, dPre } = this.work;
    for (const { input, target } of batch) {
      const scale = this.scaleOf(input);
      for (let i = 0; i < inputSize; i++) x[i] = (input[i] ?? 0) / scale;
      const t = this.run(x);
      for (let h = 0; h < horizon; h++) {
        const y = (target[h] ?? 0) / scale;
        const mu = t.mu[h] ?? 0;
        const sigma = t.sigma[h] ?? 1;
        const e = y - mu;
        loss += (Math.log(sigma) + (e * e) / (2 * sigma * sigma)) / horizon;
        dMu[h] = -e / (sigma * sigma) / horizon;
        const dSigma = (1 / sigma - (e * e) / (sigma * sigma * sigma)) / horizon;
        dPre[h] = dSigma * sigmoid(t.preScale[h] ?? 0);
      }
      this.backward(t, dMu, dPre);
    }
    const n = Math.max(1, batch.length);
    for (let j = 0; j < this.grads.length; j++) this.grads[j]! /= n;
    return loss / n;
  }

  get lastGradient(): Readonly<Float64Array> {
    return this.grads;
  }

  private backward(t: Trace, dMu: Float64Array, dPre: Float64Array): void {
    const { inputSize, horizon } = this.config;
    const p = this.params;
    const g = this.grads;
    let k = 0;
    for (let h = 0; h < horizon; h++) k += dPre[h] ?? 0;
    g[this.scaleBias] = (g[this.scaleBias] ?? 0) + k;
    // Gradient of the loss with respect to the residual after the current block (none after the last).
    const dResidual = t.dResidual.fill(0);
    for (let b = this.blocks.length - 1; b >= 0; b--) {
      const block = this.blocks[b];
      const acts = t.acts[b];
      const pooledIn = t.pooled[b];
      const argmax = t.argmax[b];
      const dTheta = t.dTheta[b];
      const dInputs = t.dInputs[b];
      if (!block || !acts || !pooledIn || !argmax || !dTheta || !dInputs) continue;
      let delta = dTheta;
      // Backcast: residual_after = residual_before - backcast.
      for (let i = 0; i < inputSize; i++) delta[i] = -(dResidual[i] ?? 0);
      for (let kk = 0; kk < block.knots; kk++) {
        let dm = 0;
        let ds = 0;
        for (let h = 0; h < horizon; h++) {
          const w = block.interp[h * block.knots + kk] ?? 0;
          dm += w * (dMu[h] ?? 0);
          ds += w * (dPre[h] ?? 0);
        }
        delta[inputSize + kk] = dm;
        delta[inputSize + block.knots + kk] = ds;
      }
      for (let l = block.layers.length - 1; l >= 0; l--) {
        const layer = block.layers[l];
        if (!layer) continue;
        const input = l === 0 ? pooledIn : (acts[l - 1] ?? pooledIn);
        const { inSize, outSize, w, b: bias } = layer;
        const dInput = (dInputs[l] as Float64Array).fill(0);
        for (let o = 0; o < outSize; o++) {
          const d = delta[o]!;
          if (d === 0) continue;
          g[bias + o]! += d;
          const row = w + o * inSize;
          // Four per turn, as in the forward pass; every element still gets its terms in the same order.
          let i = 0;
          for (; i + 3 < inSize; i += 4) {
            g[row + i]! += d * input[i]!;
            g[row + i + 1]! += d * input[i + 1]!;
            g[row + i + 2]! += d * input[i + 2]!;
            g[row + i + 3]! += d * input[i + 3]!;
            dInput[i]! += d * p[row + i]!;
            dInput[i + 1]! += d * p[row + i + 1]!;
            dInput[i + 2]! += d * p[row + i + 2]!;
            dInput[i + 3]! += d * p[row + i + 3]!;
          }
          for (; i < inSize; i++) {
            g[row + i]! += d * input[i]!;
            dInput[i]! += d * p[row + i]!;
          }
        }
        // Through the ReLU of the layer below (the pooled input has none).
        if (l > 0) for (let i = 0; i < inSize; i++) if (input[i]! <= 0) dInput[i] = 0;
        delta = dInput;
      }
      // delta is now d(loss)/d(pooled input): route it to the max positions, and add the direct path.
      for (let j = 0; j < block.pooled; j++) {
        const at = argmax[j] ?? 0;
        dResidual[at] = (dResidual[at] ?? 0) + (delta[j] ?? 0);
      }
    }
  }

  private adam(learningRate: number, gradScale: number): void {
    const beta1 = 0.9;
    const beta2 = 0.999;
    this.adamSteps++;
    const c1 = 1 - beta1 ** this.adamSteps;
    const c2 = 1 - beta2 ** this.adamSteps;
    const { params, grads, adamM, adamV } = this;
    for (let j = 0; j < params.length; j++) {
      const gj = grads[j]! * gradScale;
      const m = beta1 * adamM[j]! + (1 - beta1) * gj;
      const v = beta2 * adamV[j]! + (1 - beta2) * gj * gj;
      adamM[j] = m;
      adamV[j] = v;
      params[j]! -= (learningRate * (m / c1)) / (Math.sqrt(v / c2) + 1e-8);
    }
  }
}
