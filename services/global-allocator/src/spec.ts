import { serviceNameProblem } from "@infergrid/control-plane";
import { lognormalMean } from "@infergrid/core";
import { profileProblem, type ServiceModel } from "@infergrid/kairos";
import { findOnnxModelInfo, onnxModels } from "@infergrid/model-catalogue";
import { control } from "@infergrid/proto";
import { GrpcStatusError, grpc } from "@infergrid/runtime";

export interface SpecDefaults {
  initialBackends: number;
  minBackends: number;
  burstFactor: number;
}

const invalid = (message: string) => new GrpcStatusError(grpc.status.INVALID_ARGUMENT, message);

/**
 * The model's per-instance-type profiles, checked: types named and distinct, each a non-empty curve of
 * ascending positive integer batches with 0 < mean_ms <= p99_ms; with a price list (`knownTypes`
 * non-empty), only its types, so a misspelt type is refused instead of leaving the service without backends.
 */
function instanceProfiles(
  profiles: readonly control.InstanceProfile.$Properties[] | null | undefined,
  knownTypes: readonly string[],
): control.InstanceProfile[] {
  const seen = new Set<string>();
  return (profiles ?? []).map((p, i) => {
    const at = `spec.model.instance_profiles[${i}]`;
    const type = p.instanceType?.trim() ?? "";
    if (!type) throw invalid(`${at}.instance_type is required`);
    if (seen.has(type)) throw invalid(`${at}.instance_type: ${type} has a profile already`);
    seen.add(type);
    if (knownTypes.length > 0 && !knownTypes.includes(type))
      throw invalid(`${at}.instance_type: ${type} is not in the allocator's instance-type price list (${knownTypes.join(", ")})`);
    const points = (p.points ?? []).map((pt) => ({ batch: pt.batch ?? 0, meanMs: pt.meanMs ?? 0, p99Ms: pt.p99Ms ?? 0 }));
    // The same check the frontends and backends rely on (libs/kairos), so what is accepted here they can use.
    const problem = profileProblem(points);
    if (problem !== undefined) throw invalid(`${at}.${problem}`);
    return control.InstanceProfile.create({ instanceType: type, points: points.map((pt) => control.BatchLatency.create(pt)) });
  });
}
/** An hour per request: beyond any inference model, and far inside what the planners compute with. */
const MAX_PROFILE_MEAN_MS = 3_600_000;
const isNonNegative = (x: number | null | undefined) => typeof x === "number" && Number.isFinite(x) && x >= 0;

/** A spec's model, checked (errors name the field under spec.model) and with its defaults. */
export function normalizeModel(
  model: control.ModelSpec.$Properties | null | undefined,
  knownTypes: readonly string[] = [],
): control.ModelSpec {
  if (!model) throw invalid("spec.model is required");
  // Checked whatever the kind: an ONNX model's profile is what the slow loop plans it with.
  const p = model.profile;
  if (p) {
    for (const [key, value] of [
      ["shape", p.shape],
      ["loc_ms", p.locMs],
      ["scale_ms", p.scaleMs],
    ] as const) {
      if (!isNonNegative(value)) throw invalid(`spec.model.profile.${key} must be a finite number >= 0 (got ${value})`);
    }
    // A finite shape can still give an infinite mean (exp(shape²/2)), and one service the slow loop cannot plan
    // leaves every service without a plan.
    const meanMs = lognormalMean({ shape: p.shape ?? 0, loc: p.locMs ?? 0, scale: p.scaleMs ?? 0 });
    if (!(meanMs <= MAX_PROFILE_MEAN_MS))
      throw invalid(`spec.model.profile: its mean service time must be at most ${MAX_PROFILE_MEAN_MS} ms (got ${meanMs} ms)`);
  }
  if (model.kind === control.ModelKind.MODEL_KIND_EMULATED) {
    if (!p) throw invalid("spec.model.profile is required for MODEL_KIND_EMULATED");
  } else if (model.kind === control.ModelKind.MODEL_KIND_ONNX) {
    const name = model.onnxModel?.trim() ?? "";
    if (!name) throw invalid("spec.model.onnx_model is required for MODEL_KIND_ONNX");
    // Refused here, not by every backend that would fail to load it.
    if (!findOnnxModelInfo(name))
      throw invalid(
        `spec.model.onnx_model: no model ${JSON.stringify(name)} in the catalogue (known: ${Object.keys(onnxModels).join(", ")})`,
      );
  } else {
    throw invalid(`spec.model.kind must be MODEL_KIND_EMULATED or MODEL_KIND_ONNX (got ${model.kind ?? 0})`);
  }
  if (!isNonNegative(model.coldStartMs ?? 0))
    throw invalid(`spec.model.cold_start_ms must be a finite number >= 0 (got ${model.coldStartMs})`);
  if ((model.intraOpThreads ?? 0) > 256) throw invalid(`spec.model.intra_op_threads must be <= 256 (got ${model.intraOpThreads})`);
  const profiles = instanceProfiles(model.instanceProfiles, knownTypes);
  const themis = model.themis;
  if (themis) {
    for (const key of ["gamma", "eps", "delta", "eta", "spread"] as const) {
      if (!isNonNegative(themis[key] ?? 0)) throw invalid(`spec.model.themis.${key} must be a finite number >= 0 (got ${themis[key]})`);
    }
  }

  return control.ModelSpec.create({
    kind: model.kind,
    ...(model.profile ? { profile: control.LognormalProfile.create({ ...model.profile }) } : {}),
    coldStartMs: model.coldStartMs ?? 0,
    onnxModel: model.onnxModel?.trim() ?? "",
    intraOpThreads: model.intraOpThreads ?? 0,
    instanceProfiles: profiles,
    ...(themis ? { themis: control.ThemisProfile.create({ ...themis }) } : {}),
  });
}

/**
 * Checks a service spec strictly and fills in the defaults; a bad spec is refused with
 * INVALID_ARGUMENT and a message that names the field, so an operator sees at once what to fix.
 */
export function normalizeSpec(
  spec: control.ServiceSpec.$Properties | null | undefined,
  defaults: SpecDefaults,
  knownTypes: readonly string[] = [],
): control.ServiceSpec {
  if (!spec) throw invalid("spec is required");
  const name = spec.name ?? "";
  const nameProblem = serviceNameProblem(name);
  if (nameProblem) throw invalid(`spec.name: ${nameProblem}`);

  const model = normalizeModel(spec.model, knownTypes);

  const sla = spec.sla;
  if (!sla) throw invalid("spec.sla is required");
  const threshold = sla.latencyThresholdMs ?? 0;
  if (!(Number.isFinite(threshold) && threshold > 0)) throw invalid(`spec.sla.latency_threshold_ms must be > 0 (got ${threshold})`);
  const percentile = sla.percentile ?? 0;
  if (!(Number.isFinite(percentile) && percentile > 0 && percentile < 100))
    throw invalid(`spec.sla.percentile must be in (0, 100) (got ${percentile})`);
  const burst = sla.burstFactor || defaults.burstFactor;
  if (!(Number.isFinite(burst) && burst >= 1)) throw invalid(`spec.sla.burst_factor must be >= 1, or 0 for the default (got ${burst})`);

  const maxBackends = spec.maxBackends ?? 0;
  const minBackends = spec.minBackends || defaults.minBackends;
  if (maxBackends > 0 && minBackends > maxBackends)
    throw invalid(`spec.min_backends (${minBackends}) must not exceed spec.max_backends (${maxBackends})`);

  return control.ServiceSpec.create({
    name,
    model,
    sla: control.Sla.create({ latencyThresholdMs: threshold, percentile, burstFactor: burst }),
    minBackends,
    maxBackends,
    initialBackends: spec.initialBackends || defaults.initialBackends,
    pruneLate: spec.pruneLate ?? false,
  });
}

/** Same spec, field for field (the encoding of proto3 messages is canonical enough for that here). */
export function sameSpec(
  a: control.ServiceSpec.$Properties | null | undefined,
  b: control.ServiceSpec.$Properties | null | undefined,
): boolean {
  const x = control.ServiceSpec.encode(a ?? {}).finish();
  const y = control.ServiceSpec.encode(b ?? {}).finish();
  return x.length === y.length && x.every((v, i) => v === y[i]);
}

/**
 * What Kairos's configuration search needs of a (normalized) spec: its per-type profiles and its QoS, the
 * SLA's latency threshold. Undefined for a spec without per-type profiles.
 */
export function serviceModelOf(spec: control.ServiceSpec.$Properties | null | undefined): ServiceModel | undefined {
  const profiles = spec?.model?.instanceProfiles ?? [];
  if (profiles.length === 0) return undefined;
  return {
    profiles: new Map(
      profiles.map((p) => [
        p.instanceType ?? "",
        { points: (p.points ?? []).map((pt) => ({ batch: pt.batch ?? 0, meanMs: pt.meanMs ?? 0, p99Ms: pt.p99Ms ?? 0 })) },
      ]),
    ),
    qosMs: spec?.sla?.latencyThresholdMs ?? 0,
  };
}
