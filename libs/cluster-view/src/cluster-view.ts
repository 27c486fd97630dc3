import { instanceIdProblem, roleNameOf, serviceNameProblem } from "@infergrid/control-plane";
import { backend, type consoleView, control } from "@infergrid/proto";

/**
 * Bounds on what load reports can make the console hold: frontends reporting one service (far above any
 * deployment; reports with invented ids beyond it are dropped), and services heard of that the registry does
 * not list (their entry may follow; they are forgotten after `forgetMs`).
 */
const MAX_REPORTERS = 1024;
const MAX_UNLISTED_SERVICES = 256;

type ServiceView = consoleView.ServiceView.$Properties;
type ServicePoint = consoleView.ServicePoint.$Properties;
type ClusterPoint = consoleView.ClusterPoint.$Properties;
type BackendView = consoleView.BackendView.$Properties;
type ConsoleUpdate = consoleView.ConsoleUpdate.$Properties;
type PoolEventView = consoleView.PoolEventView.$Properties;

export interface ClusterViewOptions {
  /** A process with no heartbeat for this long is missing (a backend in a list) or gone (anything else). */
  staleMs: number;
  /** A frontend's load report older than this no longer counts towards the values of now. */
  reportFreshMs: number;
  /** One series point per this many ms (the shell calls `sample` this often). */
  sampleMs: number;
  /** Series points kept, as a time span. */
  historyMs: number;
  /** A backend nobody lists and nobody heard from for this long is forgotten. */
  forgetMs: number;
  /** Pool events kept. */
  events: number;
}

export const CLUSTER_VIEW_DEFAULTS: ClusterViewOptions = {
  // Heartbeats come every second: three missed ones make a process missing.
  staleMs: 3_500,
  reportFreshMs: 5_000,
  sampleMs: 1_000,
  historyMs: 10 * 60_000,
  forgetMs: 60_000,
  events: 40,
};

export type BackendStateName = "warm" | "busy" | "cold" | "provisioning" | "draining" | "loaned" | "missing";

const STATE_NAMES: Record<number, BackendStateName> = {
  [backend.BackendState.BACKEND_STATE_COLD]: "cold",
  [backend.BackendState.BACKEND_STATE_PROVISIONING]: "provisioning",
  [backend.BackendState.BACKEND_STATE_WARM_IDLE]: "warm",
  [backend.BackendState.BACKEND_STATE_BUSY]: "busy",
  [backend.BackendState.BACKEND_STATE_DRAINING]: "draining",
};

const EVENT_NAMES: Record<number, string> = {
  [control.PoolEventKind.POOL_EVENT_KIND_JOINED]: "joined",
  [control.PoolEventKind.POOL_EVENT_KIND_ASSIGNED]: "assigned",
  [control.PoolEventKind.POOL_EVENT_KIND_RETURNED]: "returned",
  [control.PoolEventKind.POOL_EVENT_KIND_LEFT]: "left",
};

interface BackendSeen {
  id: string;
  address: string;
  service: string;
  job: string;
  state: BackendStateName;
  instanceType: string;
  cores: number;
  lastSeen: number;
}

interface MemberSeen {
  role: string;
  id: string;
  address: string;
  startedAt: number;
  lastSeen: number;
}

interface FrontendReport {
  report: control.LoadReport;
  at: number;
}

/** What one service's load reports added up to since the last series point. */
interface Interval {
  violations: number;
  drops: number;
  completed: number;
  p50Weighted: number;
  p99Max: number;
}

interface ServiceRecord {
  entry: control.ServiceEntry | undefined;
  reports: Map<string, FrontendReport>;
  requests: number;
  completed: number;
  withinSlo: number;
  failed: number;
  interval: Interval;
  forecast: { forecast: control.Forecast; at: number } | undefined;
  series: ServicePoint[];
}

const emptyInterval = (): Interval => ({ violations: 0, drops: 0, completed: 0, p50Weighted: 0, p99Max: 0 });

const num = (x: number | null | undefined): number => (typeof x === "number" && Number.isFinite(x) ? x : 0);

/**
 * The console's view of the cluster, built only from what the control plane publishes (heartbeats, the
 * frontends' load reports, the predictor's forecasts, the allocator's plans and pool events, the registry's
 * ordered lists), over an injected clock: the console service feeds it NATS messages and renders `update`s;
 * tests feed it messages directly.
 */
export class ClusterView {
  private readonly options: ClusterViewOptions;
  private readonly backends = new Map<string, BackendSeen>();
  private readonly members = new Map<string, MemberSeen>();
  private readonly services = new Map<string, ServiceRecord>();
  private readonly events: PoolEventView[] = [];
  private readonly clusterSeries: ClusterPoint[] = [];
  private plan: control.AllocationPlan | undefined;
  private seq = 0;

  constructor(options: Partial<ClusterViewOptions> = {}) {
    this.options = { ...CLUSTER_VIEW_DEFAULTS, ...options };
  }

  get sampleMs(): number {
    return this.options.sampleMs;
  }

  /** The service's record, made for a name the registry does not list only while few such are held. */
  private heardOf(name: string): ServiceRecord | undefined {
    if (this.services.has(name)) return this.services.get(name);
    let unlisted = 0;
    for (const s of this.services.values()) if (!s.entry) unlisted++;
    return unlisted < MAX_UNLISTED_SERVICES ? this.service(name) : undefined;
  }

  private service(name: string): ServiceRecord {
    let s = this.services.get(name);
    if (!s) {
      s = {
        entry: undefined,
        reports: new Map(),
        requests: 0,
        completed: 0,
        withinSlo: 0,
        failed: 0,
        interval: emptyInterval(),
        forecast: undefined,
        series: [],
      };
      this.services.set(name, s);
    }
    return s;
  }

  onHeartbeat(hb: control.Heartbeat, now: number): void {
    const id = hb.id;
    if (!id) return;
    if (hb.role === control.Role.ROLE_BACKEND) {
      const report = hb.backend;
      if (hb.draining) {
        const prev = this.backends.get(id);
        if (prev) {
          prev.state = "draining";
          prev.lastSeen = now;
        }
        return;
      }
      const job = report?.job ?? "";
      this.backends.set(id, {
        id,
        address: hb.address ?? "",
        service: report?.service ?? "",
        job,
        state: job ? "loaned" : (STATE_NAMES[report?.state ?? 0] ?? "cold"),
        instanceType: hb.instanceType ?? "",
        cores: report?.cores ?? 0,
        lastSeen: now,
      });
      return;
    }
    const role = roleNameOf(hb.role);
    if (!role) return;
    const key = `${role}/${id}`;
    if (hb.draining) {
      this.members.delete(key);
      return;
    }
    this.members.set(key, { role, id, address: hb.address ?? "", startedAt: num(hb.startedAtUnixMs), lastSeen: now });
  }

  onLoadReport(r: control.LoadReport, now: number): void {
    if (serviceNameProblem(r.service) !== undefined || instanceIdProblem(r.frontendId) !== undefined) return;
    const s = this.heardOf(r.service);
    if (!s || (s.reports.size >= MAX_REPORTERS && !s.reports.has(r.frontendId))) return;
    const arrivals = num(r.arrivals);
    const completed = num(r.completed);
    const within = Math.min(completed, num(r.withinSlo));
    const failed = num(r.failed);
    s.requests += arrivals;
    s.completed += completed;
    s.withinSlo += within;
    s.failed += failed;
    s.interval.violations += completed - within;
    s.interval.drops += failed;
    if (completed > 0) {
      s.interval.completed += completed;
      s.interval.p50Weighted += completed * num(r.latencyP50Ms);
      s.interval.p99Max = Math.max(s.interval.p99Max, num(r.latencyP99Ms));
    }
    s.reports.set(r.frontendId, { report: r, at: now });
  }

  onForecast(f: control.Forecast, now: number): void {
    if (serviceNameProblem(f.service) !== undefined) return;
    const s = this.heardOf(f.service);
    if (s) s.forecast = { forecast: f, at: now };
  }

  onPlan(p: control.AllocationPlan): void {
    if (this.plan && num(p.seq) < num(this.plan.seq) && num(p.issuedAtUnixMs) <= num(this.plan.issuedAtUnixMs)) return;
    this.plan = p;
  }

  onPoolEvent(e: control.PoolEvent): void {
    this.events.push({
      atUnixMs: num(e.atUnixMs),
      kind: EVENT_NAMES[e.kind ?? 0] ?? "unknown",
      backendId: e.backendId ?? "",
      service: e.service ?? "",
      reason: e.reason ?? "",
    });
    if (this.events.length > this.options.events) this.events.splice(0, this.events.length - this.options.events);
  }

  /** The registry's entry of a service changed (undefined: deregistered). */
  onServiceEntry(name: string, entry: control.ServiceEntry | undefined): void {
    if (!entry) {
      this.services.delete(name);
      return;
    }
    this.service(name).entry = entry;
  }

  private backendState(id: string, now: number): BackendStateName {
    const b = this.backends.get(id);
    if (!b || now - b.lastSeen > this.options.staleMs) return "missing";
    return b.state;
  }

  private live(now: number): BackendSeen[] {
    const out: BackendSeen[] = [];
    for (const b of this.backends.values()) if (now - b.lastSeen <= this.options.staleMs) out.push(b);
    return out;
  }

  private freshReports(s: ServiceRecord, now: number): control.LoadReport[] {
    const out: control.LoadReport[] = [];
    for (const [id, r] of s.reports) {
      if (now - r.at <= this.options.reportFreshMs) out.push(r.report);
      else if (now - r.at > this.options.forgetMs) s.reports.delete(id);
    }
    return out;
  }

  private forecastBand(s: ServiceRecord, now: number): consoleView.Band.$Properties | undefined {
    const f = s.forecast?.forecast;
    if (!f || !s.forecast) return undefined;
    const step = num(f.stepMs);
    // A forecast covers its steps; past them (the predictor stopped) it says nothing.
    if (now - s.forecast.at > Math.max(step * Math.max(1, num(f.steps)), 30_000)) return undefined;
    const qs = (f.quantiles ?? []).filter((q) => (q.ratePerS?.length ?? 0) > 0).sort((a, b) => num(a.quantile) - num(b.quantile));
    const first = qs[0];
    const last = qs[qs.length - 1];
    if (!first || !last) return undefined;
    let mid = first;
    for (const q of qs) if (Math.abs(num(q.quantile) - 0.5) < Math.abs(num(mid.quantile) - 0.5)) mid = q;
    const at = (q: control.QuantileForecast.$Properties) => num(q.ratePerS?.[0]);
    return {
      low: at(first),
      mid: at(mid),
      high: at(last),
      lowQuantile: num(first.quantile),
      highQuantile: num(last.quantile),
    };
  }

  private agreedN(reports: readonly control.LoadReport[]): { agreed: number; max: number } {
    const counts = new Map<number, number>();
    let max = 0;
    for (const r of reports) {
      const n = num(r.backendsInUse);
      counts.set(n, (counts.get(n) ?? 0) + 1);
      max = Math.max(max, n);
    }
    let agreed = 0;
    let votes = 0;
    for (const [n, c] of counts) if (c > votes || (c === votes && n > agreed)) [agreed, votes] = [n, c];
    return { agreed, max };
  }

  private share(name: string): consoleView.PlanShare.$Properties | undefined {
    const a = this.plan?.services?.find((x) => x.service === name);
    return (
      a && {
        service: name,
        share: num(a.share) || num(a.maxBackends),
        maxBackends: num(a.maxBackends),
        minWarm: num(a.minWarm),
        predictedRatePerS: num(a.predictedRatePerS),
        utility: num(a.utility),
      }
    );
  }

  /** Takes one series point per service and one of the cluster; called every `sampleMs`. */
  sample(now: number): void {
    this.seq++;
    const horizon = now - this.options.historyMs;
    for (const [name, s] of this.services) {
      if (!s.entry) {
        // Reports or forecasts of a service the registry does not have: kept a while (its entry may follow), then dropped.
        let last = s.forecast?.at ?? 0;
        for (const r of s.reports.values()) last = Math.max(last, r.at);
        if (now - last > this.options.forgetMs) this.services.delete(name);
        continue;
      }
      const reports = this.freshReports(s, now);
      const band = this.forecastBand(s, now);
      const counts = { warm: 0, busy: 0, cold: 0, provisioning: 0, draining: 0, missing: 0 };
      for (const ref of s.entry.backends ?? []) {
        const st = this.backendState(ref.backendId ?? "", now);
        if (st === "loaned") counts.warm++;
        else counts[st]++;
      }
      const iv = s.interval;
      s.series.push({
        atUnixMs: now,
        ratePerS: rateOf(reports),
        ...(band ? { hasForecast: true, forecastLow: band.low, forecastMid: band.mid, forecastHigh: band.high } : {}),
        agreedN: this.agreedN(reports).agreed,
        share: this.share(name)?.share ?? 0,
        ...(iv.completed > 0 ? { hasLatency: true, p50Ms: iv.p50Weighted / iv.completed, p99Ms: iv.p99Max } : {}),
        violations: iv.violations,
        drops: iv.drops,
        ...counts,
      });
      s.interval = emptyInterval();
      trim(s.series, horizon);
    }
    const live = this.live(now);
    this.clusterSeries.push({
      atUnixMs: now,
      backends: live.length,
      free: live.filter(isFree).length,
      loaned: live.filter(isLoaned).length,
      busy: live.filter((b) => b.state === "busy").length,
      frontends: this.membersOf("frontend", now).length,
    });
    trim(this.clusterSeries, horizon);
    for (const [id, b] of this.backends) if (now - b.lastSeen > this.options.forgetMs) this.backends.delete(id);
    for (const [key, m] of this.members) if (now - m.lastSeen > this.options.forgetMs) this.members.delete(key);
  }

  private membersOf(role: string, now: number): MemberSeen[] {
    return [...this.members.values()].filter((m) => m.role === role && now - m.lastSeen <= this.options.staleMs);
  }

  private backendView(id: string, now: number): BackendView {
    const b = this.backends.get(id);
    return {
      id,
      state: this.backendState(id, now),
      instanceType: b?.instanceType ?? "",
      cores: b?.cores ?? 0,
      job: b?.job ?? "",
      lastSeenUnixMs: b?.lastSeen ?? 0,
    };
  }

  /**
   * The cluster now. `series`: "all" sends every point kept (a page's first update), "latest" only the point
   * taken by the last `sample` (the updates after it).
   */
  update(now: number, series: "all" | "latest"): ConsoleUpdate {
    const listed = new Set<string>();
    const services: ServiceView[] = [];
    for (const name of [...this.services.keys()].sort()) {
      const s = this.services.get(name);
      if (!s?.entry) continue;
      const entry = s.entry;
      const reports = this.freshReports(s, now);
      const { agreed, max } = this.agreedN(reports);
      let completed = 0;
      let p50 = 0;
      let p99 = 0;
      let windows = 0;
      let compliant = 0;
      for (const r of reports) {
        const c = num(r.completed);
        completed += c;
        p50 += c * num(r.latencyP50Ms);
        if (c > 0) p99 = Math.max(p99, num(r.latencyP99Ms));
      }
      // Compliance is cumulative per frontend: every frontend's last report counts, fresh or not.
      for (const r of s.reports.values()) {
        windows += num(r.report.slaWindows);
        compliant += num(r.report.slaCompliantWindows);
      }
      const band = this.forecastBand(s, now);
      const share = this.share(name);
      for (const ref of entry.backends ?? []) listed.add(ref.backendId ?? "");
      services.push({
        name,
        sloMs: num(entry.spec?.sla?.latencyThresholdMs),
        slaPercentile: num(entry.spec?.sla?.percentile),
        backends: (entry.backends ?? []).map((ref) => this.backendView(ref.backendId ?? "", now)),
        frontends: reports
          .map((r) => ({
            id: r.frontendId ?? "",
            n: num(r.backendsInUse),
            frontendsEstimate: num(r.frontendsEstimate),
            globalRateEstimate: num(r.globalRateEstimate),
            reportedAtUnixMs: num(r.windowEndUnixMs),
          }))
          .sort((a, b) => (a.id < b.id ? -1 : 1)),
        agreedN: agreed,
        maxN: max,
        requests: s.requests,
        completed: s.completed,
        withinSlo: s.withinSlo,
        failed: s.failed,
        slaWindows: windows,
        slaCompliantWindows: compliant,
        ratePerS: rateOf(reports),
        p50Ms: completed > 0 ? p50 / completed : 0,
        p99Ms: p99,
        ...(band ? { forecast: band } : {}),
        forecastModel: band ? (s.forecast?.forecast.model ?? "") : "",
        share: share?.share ?? 0,
        minWarm: num(entry.minWarm),
        plannedRatePerS: share?.predictedRatePerS ?? 0,
        plannedUtility: share?.utility ?? 0,
        series: series === "all" ? s.series : s.series.slice(-1),
      });
    }
    const live = this.live(now);
    const members = [...this.members.values()]
      .filter((m) => now - m.lastSeen <= this.options.staleMs)
      .sort((a, b) => (a.role === b.role ? (a.id < b.id ? -1 : 1) : a.role < b.role ? -1 : 1))
      .map((m) => ({ role: m.role, id: m.id, address: m.address, lastSeenUnixMs: m.lastSeen, startedAtUnixMs: m.startedAt }));
    const p = this.plan;
    return {
      atUnixMs: now,
      seq: this.seq,
      full: series === "all",
      sampleMs: this.options.sampleMs,
      services,
      cluster: {
        backends: live.length,
        freeBackends: live.filter(isFree).length,
        loanedBackends: live.filter(isLoaned).length,
        members,
        ...(p
          ? {
              plan: {
                seq: num(p.seq),
                issuedAtUnixMs: num(p.issuedAtUnixMs),
                objective: p.objective ?? "",
                objectiveValue: num(p.objectiveValue),
                objectiveUpperBound: num(p.objectiveUpperBound),
                solveMs: num(p.solveMs),
                solvedAtUnixMs: num(p.solvedAtUnixMs),
                poolSize: num(p.poolSize),
                freeBackends: num(p.freeBackends),
                shares: (p.services ?? []).map((a) => this.share(a.service ?? "") ?? { service: a.service ?? "" }),
              },
            }
          : {}),
        models: [...this.services]
          .filter(([, s]) => s.forecast !== undefined)
          .map(([name, s]) => ({
            service: name,
            model: s.forecast?.forecast.model ?? "",
            issuedAtUnixMs: num(s.forecast?.forecast.issuedAtUnixMs),
          })),
        events: this.events,
        series: series === "all" ? this.clusterSeries : this.clusterSeries.slice(-1),
        pool: live
          .filter((b) => !listed.has(b.id))
          .sort((a, b) => (a.id < b.id ? -1 : 1))
          .map((b) => this.backendView(b.id, now)),
      },
    };
  }
}

/** In the pool: assigned to no service and lent to no job. */
const isFree = (b: BackendSeen) => b.service === "" && b.job === "";
const isLoaned = (b: BackendSeen) => b.job !== "";

function rateOf(reports: readonly control.LoadReport[]): number {
  let rate = 0;
  for (const r of reports) {
    const seconds = (num(r.windowEndUnixMs) - num(r.windowStartUnixMs)) / 1000;
    if (seconds > 0) rate += num(r.arrivals) / seconds;
  }
  return rate;
}

function trim<T extends { atUnixMs?: number | null }>(points: T[], horizon: number): void {
  let drop = 0;
  while (drop < points.length && num(points[drop]?.atUnixMs) < horizon) drop++;
  if (drop > 0) points.splice(0, drop);
}
