/**
 * What the vertical-scaling mode shows, observed from outside: per second of load the requests sent, the
 * ones that missed the SLO, the service's warm backends with their cores and the ones still starting (from
 * the backends' heartbeats), the core-seconds they held, and when the first in-place resize, the first new
 * backend warm and the return to 1-core replicas happened. Pure: time comes in as arguments; `watchThemis`
 * feeds it from NATS.
 */
import { subjects } from "@infergrid/control-plane";
import { backend, control } from "@infergrid/proto";
import { connectNats, createLogger, subscribeMessages } from "@infergrid/runtime";
import type { NatsObserver } from "./local-cluster.js";

const WARM = new Set([backend.BackendState.BACKEND_STATE_WARM_IDLE, backend.BackendState.BACKEND_STATE_BUSY]);

interface Seen {
  service: string;
  state: backend.BackendState;
  cores: number;
  maxBatch: number;
  at: number;
}

export interface TimelineRow {
  /** Second of load (0 = the first). */
  second: number;
  /** Requests sent in this second. */
  sent: number;
  /** Of those, failed or answered later than the SLO. */
  violations: number;
  /** Cores of each warm backend of the service at the second's end, largest first. */
  cores: number[];
  /** Batch limit of each warm backend, in the order of `cores`. */
  maxBatch: number[];
  /** Backends assigned to the service that are not warm yet (starting). */
  starting: number;
}

export interface ThemisEvents {
  /** Second the first backend of the service reported more than one core. */
  firstResizeS: number | null;
  /** Second the first backend other than those warm at the start reported warm. */
  firstNewWarmS: number | null;
  /** First second, after the first resize, at which two or more warm backends all had one core. */
  backOnOneCoreS: number | null;
}

export interface ThemisTimelineSummary {
  service: string;
  sloMs: number;
  coreSeconds: number;
  events: ThemisEvents;
  rows: TimelineRow[];
  /** Every backend that served the service, with its gRPC address (to check that none is left running). */
  backends: { id: string; address: string }[];
}

export class ThemisTimeline {
  private readonly seen = new Map<string, Seen>();
  private readonly addresses = new Map<string, string>();
  private readonly sentBySecond: number[] = [];
  private readonly violationsBySecond: number[] = [];
  private readonly samples = new Map<number, Pick<TimelineRow, "cores" | "maxBatch" | "starting">>();
  private initial = new Set<string>();
  private start = Number.NaN;
  private end = Number.POSITIVE_INFINITY;
  private coreMs = 0;
  private accruedAt = Number.NaN;
  private readonly events: ThemisEvents = { firstResizeS: null, firstNewWarmS: null, backOnOneCoreS: null };

  constructor(
    readonly service: string,
    readonly sloMs: number,
    /** A backend silent this long no longer counts (it stopped). */
    private readonly staleMs: number,
  ) {}

  /** The load begins: backends warm now are the initial ones; core-seconds count from here. */
  begin(at: number): void {
    this.start = at;
    this.accruedAt = at;
    this.initial = new Set(this.warmIds(at));
  }

  finish(at: number): void {
    this.accrue(at);
    this.end = at;
  }

  observe(
    id: string,
    service: string,
    state: backend.BackendState,
    cores: number,
    maxBatch: number,
    draining: boolean,
    at: number,
    address = "",
  ): void {
    this.accrue(at);
    if (service === this.service && address !== "") this.addresses.set(id, address);
    if (draining) this.seen.delete(id);
    else this.seen.set(id, { service, state, cores: Math.max(1, cores), maxBatch: Math.max(1, maxBatch), at });
    if (!(at >= this.start) || at > this.end) return;
    const second = this.secondOf(at);
    if (this.events.firstResizeS === null && service === this.service && cores > 1) this.events.firstResizeS = second;
    if (this.events.firstNewWarmS === null && service === this.service && WARM.has(state) && !this.initial.has(id))
      this.events.firstNewWarmS = second;
  }

  /** One request's outcome, `latencyMs` after it was sent at `sentAt`. */
  onOutcome(ok: boolean, latencyMs: number, sentAt: number): void {
    if (!(sentAt >= this.start)) return;
    const s = this.secondOf(sentAt);
    this.sentBySecond[s] = (this.sentBySecond[s] ?? 0) + 1;
    if (!ok || latencyMs > this.sloMs) this.violationsBySecond[s] = (this.violationsBySecond[s] ?? 0) + 1;
  }

  /** The backends' sizes at `at` (call once a second during the load). */
  sample(at: number): void {
    if (!(at >= this.start) || at > this.end) return;
    this.accrue(at);
    const warm = this.warmIds(at)
      .map((id) => this.seen.get(id) as Seen)
      .sort((a, b) => b.cores - a.cores);
    const starting = [...this.seen.values()].filter(
      (s) => s.service === this.service && !WARM.has(s.state) && at - s.at <= this.staleMs,
    ).length;
    const second = Math.max(0, this.secondOf(at) - 1);
    this.samples.set(second, { cores: warm.map((s) => s.cores), maxBatch: warm.map((s) => s.maxBatch), starting });
    if (this.events.backOnOneCoreS === null && this.events.firstResizeS !== null && warm.length >= 2 && warm.every((s) => s.cores === 1))
      this.events.backOnOneCoreS = second;
  }

  /** Cores x seconds held by the service's backends (provisioning or warm) from begin to finish. */
  coreSeconds(): number {
    return this.coreMs / 1000;
  }

  summary(): ThemisTimelineSummary {
    const seconds = Math.max(this.sentBySecond.length, ...[...this.samples.keys()].map((s) => s + 1));
    const rows: TimelineRow[] = [];
    let last: Pick<TimelineRow, "cores" | "maxBatch" | "starting"> = { cores: [], maxBatch: [], starting: 0 };
    for (let s = 0; s < seconds; s++) {
      last = this.samples.get(s) ?? last;
      rows.push({ second: s, sent: this.sentBySecond[s] ?? 0, violations: this.violationsBySecond[s] ?? 0, ...last });
    }
    return {
      service: this.service,
      sloMs: this.sloMs,
      coreSeconds: Number(this.coreSeconds().toFixed(1)),
      events: { ...this.events },
      rows,
      backends: [...this.addresses].map(([id, address]) => ({ id, address })),
    };
  }

  private warmIds(at: number): string[] {
    return [...this.seen].filter(([, s]) => s.service === this.service && WARM.has(s.state) && at - s.at <= this.staleMs).map(([id]) => id);
  }

  private secondOf(at: number): number {
    return Math.floor((at - this.start) / 1000);
  }

  /** Each backend's last reported cores hold until now (at most staleMs after its beat), inside [start, end]. */
  private accrue(until: number): void {
    if (Number.isNaN(this.accruedAt)) return;
    const to = Math.min(until, this.end);
    if (!(to > this.accruedAt)) return;
    for (const s of this.seen.values()) {
      if (s.service !== this.service || s.state === backend.BackendState.BACKEND_STATE_COLD) continue;
      const from = Math.max(this.accruedAt, s.at);
      const stop = Math.min(to, s.at + this.staleMs);
      if (stop > from) this.coreMs += s.cores * (stop - from);
    }
    this.accruedAt = to;
  }
}

/** Feeds the timeline from the backends' heartbeats on NATS; resolves to a closer. */
export async function watchThemis(
  natsUrl: string,
  credentials: NatsObserver | undefined,
  timeline: ThemisTimeline,
  now: () => number,
): Promise<() => Promise<void>> {
  const logger = createLogger("local-cluster", "themis-watch", "silent");
  const nc = await connectNats({ servers: natsUrl, name: "local-cluster-themis-watch", ...credentials }, logger);
  subscribeMessages(nc, subjects.heartbeatsOf("backend"), control.Heartbeat, logger, (hb) => {
    const r = hb.backend;
    timeline.observe(
      hb.id,
      r?.service ?? "",
      r?.state ?? backend.BackendState.BACKEND_STATE_UNSPECIFIED,
      r?.cores ?? 1,
      r?.maxBatch ?? 1,
      hb.draining === true,
      now(),
      hb.address ?? "",
    );
  });
  return async () => {
    if (!nc.isClosed()) await nc.close();
  };
}

/** The timeline as text: one line per second, the step's seconds marked, then the events. */
export function renderTimeline(t: ThemisTimelineSummary, stepSeconds: (second: number) => boolean): string {
  const lines = [`\n${t.service} timeline (SLO ${t.sloMs} ms; cores of each warm backend; * = in the step):`];
  lines.push("   s  sent  late  backends  cores          starting");
  for (const r of t.rows) {
    lines.push(
      `${String(r.second).padStart(4)}${stepSeconds(r.second) ? "*" : " "}${String(r.sent).padStart(5)}${String(r.violations).padStart(6)}${String(r.cores.length).padStart(10)}  ${(r.cores.length === 0 ? "-" : r.cores.join("+")).padEnd(15)}${r.starting}`,
    );
  }
  const at = (s: number | null) => (s === null ? "never" : `second ${s}`);
  lines.push(
    `first in-place resize: ${at(t.events.firstResizeS)}; first new backend warm: ${at(t.events.firstNewWarmS)}; back on 1-core replicas: ${at(t.events.backOnOneCoreS)}; ${t.coreSeconds.toFixed(1)} core-s`,
  );
  return lines.join("\n");
}
