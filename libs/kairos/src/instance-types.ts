/**
 * Instance types as data: a name, an hourly price, how many of it may be rented, and per model a latency
 * profile measured against the query's batch size. Kairos's whole reasoning (which type can serve which
 * query within QoS, what a configuration costs, what it can serve at best) reads these tables and nothing
 * else, so they are the one place where numbers about hardware enter.
 */

/** One measured point of a latency profile: the service time of one query of `batch` items. */
export interface LatencyPoint {
  batch: number;
  meanMs: number;
  p99Ms: number;
}

/** Service time against batch size, points sorted by batch, batches distinct. */
export interface LatencyProfile {
  readonly points: readonly LatencyPoint[];
}

export interface InstanceType {
  name: string;
  pricePerHour: number;
  /** The most instances of this type a configuration may hold (the cloud account's limit). */
  maxCount: number;
  /** Per model name. */
  profiles: ReadonlyMap<string, LatencyProfile>;
}

/**
 * Service time of a query of `batch` items: the mean at the smallest measured batch at or above it (as
 * Kairos's artifact rounds a query up to the next profiled size), linear extrapolation from the last two
 * points past the largest.
 */
export function serviceMs(profile: LatencyProfile, batch: number, which: "mean" | "p99" = "mean"): number {
  const pts = profile.points;
  const at = (p: LatencyPoint) => (which === "mean" ? p.meanMs : p.p99Ms);
  let lo = 0;
  let hi = pts.length - 1;
  const last = pts[hi];
  if (last === undefined) throw new Error("empty latency profile");
  if (batch > last.batch) {
    const prev = pts[hi - 1];
    if (prev === undefined) return (at(last) * batch) / last.batch;
    return at(last) + ((at(last) - at(prev)) / (last.batch - prev.batch)) * (batch - last.batch);
  }
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((pts[mid] as LatencyPoint).batch >= batch) hi = mid;
    else lo = mid + 1;
  }
  return at(pts[lo] as LatencyPoint);
}

/**
 * A service time drawn around the profile: lognormal with the profile's mean as median and its p99 at
 * z = 2.326, from a standard normal draw `z` (so a run can reuse one draw per query whichever type serves
 * it). What an emulated backend sleeps and what the simulator's instances take.
 */
export function drawServiceMs(profile: LatencyProfile, batch: number, z: number): number {
  const median = serviceMs(profile, batch, "mean");
  const p99 = Math.max(median, serviceMs(profile, batch, "p99"));
  return median * Math.exp((Math.log(p99 / median) / 2.326) * z);
}

/**
 * Checks a profile given as points (a service spec's, say): batches positive integers, ascending and
 * distinct, latencies finite and positive with mean <= p99. Returns the problem as `points[i].field: what`
 * (or `points: ...`), or undefined when it is valid.
 */
export function profileProblem(points: readonly LatencyPoint[]): string | undefined {
  if (points.length === 0) return "points: at least one point is required";
  for (let i = 0; i < points.length; i++) {
    const p = points[i] as LatencyPoint;
    const at = `points[${i}]`;
    if (!Number.isInteger(p.batch) || p.batch < 1) return `${at}.batch must be a positive integer (got ${p.batch})`;
    const previous = i > 0 ? (points[i - 1] as LatencyPoint).batch : 0;
    if (p.batch <= previous) return `${at}.batch must be above the previous point's (${previous}): batches ascend`;
    if (!(Number.isFinite(p.meanMs) && p.meanMs > 0)) return `${at}.mean_ms must be a finite number > 0 (got ${p.meanMs})`;
    if (!(Number.isFinite(p.p99Ms) && p.p99Ms >= p.meanMs))
      return `${at}.p99_ms must be a finite number >= mean_ms (${p.meanMs}) (got ${p.p99Ms})`;
  }
  return undefined;
}

/** The profile of `model` on `type`, or an error naming both. */
export function profileOf(type: InstanceType, model: string): LatencyProfile {
  const p = type.profiles.get(model);
  if (p === undefined) {
    throw new Error(
      `instance type ${type.name} has no latency profile for model ${model} (it has: ${[...type.profiles.keys()].join(", ") || "none"})`,
    );
  }
  return p;
}

/**
 * Parses a profile table in the shared format (`instance_type,model,batch,mean_ms,p50_ms,p99_ms,samples`,
 * ../shared/profiles/kairos-aws-4types.csv) into profiles by type then model. A malformed row is an error
 * that names its line.
 */
export function parseProfileCsv(text: string): Map<string, Map<string, LatencyProfile>> {
  const lines = text.split(/\r?\n/).filter((l) => l.trim() !== "");
  const header = (lines[0] ?? "").split(",").map((h) => h.trim());
  const col = (name: string) => {
    const i = header.indexOf(name);
    if (i < 0) throw new Error(`profile table: no "${name}" column in header "${lines[0] ?? ""}"`);
    return i;
  };
  const [cType, cModel, cBatch, cMean, cP99] = [col("instance_type"), col("model"), col("batch"), col("mean_ms"), col("p99_ms")];
  const raw = new Map<string, Map<string, LatencyPoint[]>>();
  for (let n = 1; n < lines.length; n++) {
    const cells = (lines[n] as string).split(",").map((c) => c.trim());
    const type = cells[cType] ?? "";
    const model = cells[cModel] ?? "";
    const batch = Number(cells[cBatch]);
    const meanMs = Number(cells[cMean]);
    const p99Ms = Number(cells[cP99]);
    if (type === "" || model === "") throw new Error(`profile table line ${n + 1}: empty instance type or model`);
    if (!Number.isInteger(batch) || batch < 1)
      throw new Error(`profile table line ${n + 1}: batch must be a positive integer, got "${cells[cBatch]}"`);
    if (!(meanMs > 0) || !(p99Ms > 0)) throw new Error(`profile table line ${n + 1}: latencies must be positive numbers`);
    const byModel = raw.get(type) ?? new Map<string, LatencyPoint[]>();
    raw.set(type, byModel);
    const pts = byModel.get(model) ?? [];
    byModel.set(model, pts);
    pts.push({ batch, meanMs, p99Ms });
  }
  const out = new Map<string, Map<string, LatencyProfile>>();
  for (const [type, byModel] of raw) {
    const profiles = new Map<string, LatencyProfile>();
    for (const [model, pts] of byModel) {
      pts.sort((a, b) => a.batch - b.batch);
      for (let i = 1; i < pts.length; i++) {
        if ((pts[i] as LatencyPoint).batch === (pts[i - 1] as LatencyPoint).batch) {
          throw new Error(`profile table: ${type}/${model} has batch ${(pts[i] as LatencyPoint).batch} twice`);
        }
      }
      profiles.set(model, { points: pts });
    }
    out.set(type, profiles);
  }
  return out;
}
