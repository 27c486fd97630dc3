/**
 * Faro's predictor for one service, trained online: the N-HiTS network with a Gaussian head
 * (./nhits.ts) learns from the service's own history, a few gradient steps per closed bin, and a
 * fallback ladder covers the time it cannot be trusted yet:
 *   1. fewer than `lastValueUntil` bins (Faro's artifact: "latest counts until 15 bins exist"):
 *      the latest bin, with the spread of the recent bin-to-bin variation;
 *   2. until the network has taken `minTrainSteps` gradient steps: Holt;
 *   3. then the network, unless its recent pinball loss is worse than Holt's (the guard: an online
 *      model that has drifted, or a service whose pattern it has not learnt, falls back to Holt
 *      until the network catches up again).
 * Deterministic for a seed: the initial weights and the training batches come from it.
 */

import { type Random, seededRandom } from "@infergrid/core";
import { HoltForecaster, type HoltOptions, LastValueForecaster } from "./baselines.js";
import { cleanCount, meanPinball, type ProbabilisticForecast, type ProbabilisticForecaster } from "./forecaster.js";
import { type NHitsConfig, NHitsNetwork, type TrainingWindow } from "./nhits.js";
import { BinHistory } from "./series.js";

export interface NHitsForecasterOptions {
  /** Output steps (Faro: 7). */
  steps?: number;
  /** Input bins (Faro: 15). */
  inputSize?: number;
  /** Network shape beyond the input and the horizon. */
  network?: Partial<Omit<NHitsConfig, "inputSize" | "horizon">>;
  seed?: number;
  learningRate?: number;
  /** Gradient steps per closed bin. */
  stepsPerBin?: number;
  batchSize?: number;
  /** Training windows are drawn from at most this many recent bins. */
  trainMemory?: number;
  /** Rung 1 of the ladder: the latest value below this many bins (Faro: 15). */
  lastValueUntil?: number;
  /** Rung 2: Holt until the network has taken this many gradient steps. */
  minTrainSteps?: number;
  /** Quantiles the guard scores both forecasters on. */
  guardQuantiles?: readonly number[];
  /** Per-bin decay of the guard's running losses (0.98: a memory of about 50 bins). */
  guardDecay?: number;
  /** Observations are counts per bin: the spread is at least sqrt(mean). Off for rates. */
  poissonFloor?: boolean;
  holt?: HoltOptions;
}

type Settings = Required<Omit<NHitsForecasterOptions, "network" | "holt">>;

const DEFAULTS: Settings = {
  steps: 7,
  inputSize: 15,
  seed: 1,
  learningRate: 1e-3,
  stepsPerBin: 1,
  batchSize: 8,
  trainMemory: 1440,
  lastValueUntil: 15,
  minTrainSteps: 60,
  guardQuantiles: [0.1, 0.3, 0.5, 0.6, 0.7, 0.9],
  guardDecay: 0.98,
  poissonFloor: true,
};

export class NHitsForecaster implements ProbabilisticForecaster {
  readonly name = "nhits";
  readonly network: NHitsNetwork;
  private readonly options: Settings;
  private readonly random: Random;
  private readonly history: BinHistory;
  private readonly lastValue: LastValueForecaster;
  private readonly holt: HoltForecaster;
  private trainSteps = 0;
  /** Forecasts issued after each of the last `steps` bins, newest last (undefined: none issued). */
  private readonly pendingModel: (ProbabilisticForecast | undefined)[] = [];
  private readonly pendingHolt: ProbabilisticForecast[] = [];
  private guardModel = 0;
  private guardHolt = 0;
  private guardBins = 0;
  /** The network's forecast after the latest bin (the weights and the window do not change until the next). */
  private latestModel: ProbabilisticForecast | undefined;
  private readonly batch: TrainingWindow[] = [];

  constructor(options: NHitsForecasterOptions = {}) {
    const { network, holt, ...rest } = options;
    // An option given as undefined keeps its default.
    const given = Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined)) as Partial<Settings>;
    this.options = { ...DEFAULTS, ...given };
    const { steps, inputSize, seed, trainMemory, poissonFloor } = this.options;
    this.random = seededRandom(seed);
    this.network = new NHitsNetwork({ ...network, inputSize, horizon: steps }, this.random);
    this.history = new BinHistory(Math.max(trainMemory, inputSize + steps));
    this.lastValue = new LastValueForecaster({ steps, poissonFloor, variationBins: inputSize });
    this.holt = new HoltForecaster({ steps, poissonFloor, ...holt });
  }

  get observed(): number {
    return this.history.total;
  }

  /** Gradient steps taken so far. */
  get trainedSteps(): number {
    return this.trainSteps;
  }

  /** The guard's running pinball losses (network, Holt) over the recent bins both forecast. */
  get guardLosses(): { model: number; holt: number; bins: number } {
    return { model: this.guardModel, holt: this.guardHolt, bins: this.guardBins };
  }

  observe(value: number): void {
    const y = cleanCount(value);
    this.score(y);
    this.history.push(y);
    this.lastValue.observe(y);
    this.holt.observe(y);
    this.train();
    this.latestModel = this.history.length >= this.options.inputSize ? this.runModel() : undefined;
    this.pendingModel.push(this.latestModel);
    this.pendingHolt.push(this.holt.forecast());
    if (this.pendingModel.length > this.options.steps) this.pendingModel.shift();
    if (this.pendingHolt.length > this.options.steps) this.pendingHolt.shift();
  }

  forecast(): ProbabilisticForecast {
    if (this.history.total < this.options.lastValueUntil) return this.lastValue.forecast();
    if (this.trainSteps < this.options.minTrainSteps || this.history.length < this.options.inputSize) return this.holt.forecast();
    if (this.guardBins > 0 && this.guardModel > this.guardHolt) return this.holt.forecast();
    return this.modelForecast();
  }

  /** The network's own forecast, ignoring the ladder and the guard (for benchmarks). */
  rawForecast(): ProbabilisticForecast {
    return this.history.length >= this.options.inputSize ? this.modelForecast() : this.lastValue.forecast();
  }

  /** The network's forecast: computed once per bin (observe), handed out as a copy the guard's record cannot be changed through. */
  private modelForecast(): ProbabilisticForecast {
    const f = this.latestModel ?? this.runModel();
    return { model: f.model, mean: [...f.mean], std: [...f.std] };
  }

  private runModel(): ProbabilisticForecast {
    const { mean, std } = this.network.predict(this.history.tail(this.options.inputSize));
    const floor = this.options.poissonFloor;
    return { model: "nhits", mean, std: std.map((s, i) => Math.max(s, floor ? Math.sqrt(mean[i] ?? 0) : 0)) };
  }

  /** Scores the network and Holt on the bin just closed, over the forecasts both issued for it. */
  private score(actual: number): void {
    let model = 0;
    let holt = 0;
    let scored = false;
    const q = this.options.guardQuantiles;
    for (let h = 1; h <= this.pendingHolt.length; h++) {
      const m = this.pendingModel[this.pendingModel.length - h];
      const o = this.pendingHolt[this.pendingHolt.length - h];
      if (!m || !o) continue;
      model += meanPinball(m, h - 1, actual, q);
      holt += meanPinball(o, h - 1, actual, q);
      scored = true;
    }
    if (!scored) return;
    const d = this.options.guardDecay;
    this.guardModel = d * this.guardModel + model;
    this.guardHolt = d * this.guardHolt + holt;
    this.guardBins++;
  }

  private train(): void {
    const { inputSize, steps, stepsPerBin, batchSize, learningRate } = this.options;
    const span = inputSize + steps;
    const windows = this.history.length - span + 1;
    if (windows < 1) return;
    // The batch's windows are refilled in place, bin after bin (the network reads them within trainStep).
    const size = Math.max(1, batchSize);
    while (this.batch.length < size) this.batch.push({ input: new Float64Array(inputSize), target: new Float64Array(steps) });
    const fill = (w: TrainingWindow, start: number) => {
      const input = w.input as Float64Array;
      const target = w.target as Float64Array;
      for (let i = 0; i < inputSize; i++) input[i] = this.history.at(start + i);
      for (let h = 0; h < steps; h++) target[h] = this.history.at(start + inputSize + h);
    };
    for (let s = 0; s < stepsPerBin; s++) {
      // The newest complete window always, so the network keeps up with the latest pattern; the
      // rest drawn from the remembered history, so it does not forget the older ones.
      fill(this.batch[0] as TrainingWindow, windows - 1);
      for (let b = 1; b < size; b++) fill(this.batch[b] as TrainingWindow, Math.floor(this.random.uniform() * windows));
      this.network.trainStep(this.batch, learningRate);
      this.trainSteps++;
    }
  }
}
