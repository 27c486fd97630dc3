/**
 * Kairos's throughput upper bound (section 5.2, Eqs. 9-15): the most queries per second a configuration
 * could serve within QoS if queries came when convenient, with no queueing and no idle instance. One base
 * type (the most cost-effective type that meets QoS for every query) serves the large queries; auxiliary
 * types serve the queries small enough to meet QoS on them. Every auxiliary type is credited with the
 * largest QoS-respecting region among the types present (the paper's optimistic simplification), so the
 * bound only ranks configurations; the matching and the simulator say what they really serve.
 */
import { type InstanceType, profileOf, serviceMs } from "./instance-types.js";

export interface BoundInputs {
  /** The catalogue, in a fixed order: configurations are counts in this order. */
  types: readonly InstanceType[];
  model: string;
  qosMs: number;
  /** Recent query sizes (Kairos monitors its last 10,000 queries). */
  batches: readonly number[];
}

export interface TypeStanding {
  name: string;
  /** Smallest profiled batch whose mean service time exceeds QoS; Infinity when every query meets it. */
  violatingBatch: number;
  /**
   * The largest query that meets QoS on this type: the profiled batch before the violating one (a query is
   * served at the profiled batch at or above it), 0 when even the smallest profiled batch violates.
   */
  largestSmallBatch: number;
  /** Share of the queries that meet QoS on this type alone. */
  smallShare: number;
  /** Queries per second on this type serving every query (meaningful for the base type). */
  qpsAll: number;
}

export interface UpperBound {
  /** Index of the base type in `types`. */
  base: number;
  standings: readonly TypeStanding[];
  /** QPS_max of a configuration (counts per type, in `types` order). */
  of(counts: readonly number[]): number;
}

function qosRegion(type: InstanceType, model: string, qosMs: number): { violatingBatch: number; largestSmallBatch: number } {
  let largestSmallBatch = 0;
  for (const p of profileOf(type, model).points) {
    if (p.meanMs > qosMs) return { violatingBatch: p.batch, largestSmallBatch };
    largestSmallBatch = p.batch;
  }
  return { violatingBatch: Number.POSITIVE_INFINITY, largestSmallBatch: Number.POSITIVE_INFINITY };
}

/** Mean service time (ms) on `type` over the queries `keep` selects; NaN when it selects none. */
function meanServiceMs(type: InstanceType, model: string, batches: readonly number[], keep: (b: number) => boolean): number {
  const profile = profileOf(type, model);
  let sum = 0;
  let n = 0;
  for (const b of batches) {
    if (!keep(b)) continue;
    sum += serviceMs(profile, b);
    n++;
  }
  return n === 0 ? Number.NaN : sum / n;
}

/**
 * The bound for one model, QoS and query mix. Throws when no type meets QoS for every query (there is no
 * base type, so no configuration can serve the mix) or when a type has no profile for the model.
 */
export function upperBound(inputs: BoundInputs): UpperBound {
  const { types, model, qosMs, batches } = inputs;
  if (batches.length === 0) throw new Error("upper bound: no query sizes to compute it on");
  const largest = Math.max(...batches);
  const standings: TypeStanding[] = types.map((t) => {
    const region = qosRegion(t, model, qosMs);
    return {
      name: t.name,
      ...region,
      smallShare: batches.filter((b) => b <= region.largestSmallBatch).length / batches.length,
      qpsAll: 1000 / meanServiceMs(t, model, batches, () => true),
    };
  });
  let base = -1;
  for (let i = 0; i < types.length; i++) {
    const s = standings[i] as TypeStanding;
    if (s.largestSmallBatch < largest) continue;
    const perDollar = s.qpsAll / (types[i] as InstanceType).pricePerHour;
    if (base < 0 || perDollar > (standings[base] as TypeStanding).qpsAll / (types[base] as InstanceType).pricePerHour) base = i;
  }
  if (base < 0) {
    throw new Error(
      `no instance type meets the ${qosMs} ms QoS of ${model} for its largest queries (batch ${largest}): ` +
        standings.map((s) => `${s.name} exceeds it from batch ${s.violatingBatch}`).join(", "),
    );
  }
  const baseType = types[base] as InstanceType;
  const qb = (standings[base] as TypeStanding).qpsAll;
  // Per aggregate region (the largest QoS-meeting batch among the auxiliary types present): f', Q_b^{s+}
  // and each type's Q_a over the region. At most one entry per distinct region.
  const regions = new Map<number, { f: number; qbLarge: number; qa: number[] }>();
  const region = (agg: number) => {
    let r = regions.get(agg);
    if (r === undefined) {
      const small = (b: number) => b <= agg;
      const f = batches.filter(small).length / batches.length;
      const qbLarge = 1000 / meanServiceMs(baseType, model, batches, (b) => !small(b));
      const qa = types.map((t) => 1000 / meanServiceMs(t, model, batches, small));
      r = { f, qbLarge, qa };
      regions.set(agg, r);
    }
    return r;
  };
  const of = (counts: readonly number[]): number => {
    const u = counts[base] ?? 0;
    let agg = 0;
    for (let i = 0; i < types.length; i++) {
      if (i !== base && (counts[i] ?? 0) > 0) agg = Math.max(agg, (standings[i] as TypeStanding).largestSmallBatch);
    }
    const anyAux = counts.some((n, i) => i !== base && n > 0);
    if (!anyAux) return u * qb;
    // No base to serve the large queries: the mix cannot be served within QoS.
    if (u === 0) return 0;
    const { f, qbLarge, qa } = region(agg);
    let auxQps = 0;
    for (let i = 0; i < types.length; i++) if (i !== base) auxQps += (counts[i] ?? 0) * ((qa[i] as number) || 0);
    if (f <= 0) return u * qb;
    if (f >= 1) return auxQps + u * qb;
    const c = (auxQps * (1 - f)) / f; // Eq. 14
    const baseLarge = u * qbLarge;
    if (baseLarge <= c) return baseLarge / (1 - f); // Eq. 15, the base is the bottleneck
    return auxQps / f + ((baseLarge - c) / baseLarge) * u * qb; // Eq. 15, the auxiliaries are
  };
  return { base, standings, of };
}
