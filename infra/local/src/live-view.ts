import type { LiveStats, ServiceTotals } from "./stats.js";
import { ms, pct, plainTable } from "./summary.js";

export interface LiveRow {
  service: string;
  sloMs: number;
  live: LiveStats;
  totals: ServiceTotals;
  /** Largest prefix n any frontend dispatches into now. */
  inUse: number;
  /** Backends provisioning or warm for the service now (heartbeats). */
  occupied: number;
}

export interface LiveFrame {
  elapsedMs: number;
  totalMs: number;
  inFlight: number;
  rows: LiveRow[];
}

const clock = (totalMs: number): string => {
  const s = Math.max(0, Math.round(totalMs / 1000));
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
};

/** The redrawn block: one line of progress, then a table of the last 10 s per service. */
export function renderFrame(f: LiveFrame): string {
  const table = plainTable(["service", "req/s", "n in use", "warm", "p50 ms", "p99 ms", "within SLO", "sent", "answered", "failed"]);
  for (const r of f.rows) {
    table.push([
      r.service,
      r.live.rateRps.toFixed(1),
      r.inUse,
      r.occupied,
      ms(Number.isFinite(r.live.p50Ms) ? r.live.p50Ms : null),
      ms(Number.isFinite(r.live.p99Ms) ? r.live.p99Ms : null),
      `${pct(Number.isFinite(r.live.attainment) ? r.live.attainment : null)} (<=${r.sloMs})`,
      r.totals.sent,
      r.totals.answered,
      r.totals.failed,
    ]);
  }
  const share = f.totalMs > 0 ? Math.min(1, f.elapsedMs / f.totalMs) : 0;
  const barWidth = 30;
  const filled = Math.round(share * barWidth);
  const bar = `[${"#".repeat(filled)}${".".repeat(barWidth - filled)}]`;
  const head = `${clock(f.elapsedMs)} / ${clock(f.totalMs)} ${bar} ${f.inFlight} in flight   (rates and latencies: last 10 s; Ctrl-C stops)`;
  return `${head}\n${table.toString()}`;
}

/** One line per service, for logs and pipes. */
export function renderLines(f: LiveFrame): string {
  const t = clock(f.elapsedMs);
  return f.rows
    .map(
      (r) =>
        `[${t}/${clock(f.totalMs)}] ${r.service}: ${r.live.rateRps.toFixed(1)} req/s, n=${r.inUse}, warm=${r.occupied}, p50 ${ms(
          Number.isFinite(r.live.p50Ms) ? r.live.p50Ms : null,
        )} ms, p99 ${ms(Number.isFinite(r.live.p99Ms) ? r.live.p99Ms : null)} ms, within SLO ${pct(
          Number.isFinite(r.live.attainment) ? r.live.attainment : null,
        )}; sent ${r.totals.sent}, answered ${r.totals.answered}, failed ${r.totals.failed}`,
    )
    .join("\n");
}

/** Rows `text` takes on a terminal `columns` wide (long lines wrap), to know how far up to redraw. */
export function screenRows(text: string, columns: number | undefined): number {
  const width = columns && columns > 0 ? columns : Number.POSITIVE_INFINITY;
  return text.split("\n").reduce((rows, line) => rows + Math.max(1, Math.ceil(line.length / width)), 0);
}

/**
 * Redraws the frame in place once a second on a terminal; elsewhere prints plain lines every
 * `plainEveryMs`, so a log of the run stays readable.
 */
export class LiveView {
  private timer: NodeJS.Timeout | undefined;
  private drawnLines = 0;
  private lastPlain = 0;

  constructor(
    private readonly out: NodeJS.WriteStream,
    private readonly frame: () => LiveFrame,
    private readonly plainEveryMs = 5_000,
  ) {}

  get isTty(): boolean {
    return this.out.isTTY === true;
  }

  start(): void {
    this.timer = setInterval(() => this.draw(), 1000);
    this.lastPlain = Date.now();
  }

  private draw(): void {
    const f = this.frame();
    if (this.isTty) {
      const text = renderFrame(f);
      // Up to the start of the previous frame and clear to the end of the screen.
      const erase = this.drawnLines > 0 ? `\x1b[${this.drawnLines}F\x1b[0J` : "";
      this.out.write(`${erase}${text}\n`);
      this.drawnLines = screenRows(text, this.out.columns);
    } else if (Date.now() - this.lastPlain >= this.plainEveryMs) {
      this.lastPlain = Date.now();
      this.out.write(`${renderLines(f)}\n`);
    }
  }

  /**
   * A line of news (a process died or was restarted) between frames: on a terminal it goes above the frame,
   * which is drawn again below it at once while the view runs.
   */
  print(line: string): void {
    if (!this.isTty) {
      this.out.write(`${line}\n`);
      return;
    }
    const erase = this.timer !== undefined && this.drawnLines > 0 ? `\x1b[${this.drawnLines}F\x1b[0J` : "";
    this.out.write(`${erase}${line}\n`);
    this.drawnLines = 0;
    if (this.timer !== undefined) this.draw();
  }

  /** Stops redrawing; the last frame stays on screen. */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Something else is printed: the next frame starts below it instead of over it. */
  detach(): void {
    this.drawnLines = 0;
  }
}
