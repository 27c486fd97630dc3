import { LatencyHistogram } from "@infergrid/workload";
import type { Outcome } from "./load-generator.js";

/** Where the served requests of one size class (or all of them) went, as the summary shows it. */
export interface SizeRow {
  answered: number;
  /** Share of the class's answered requests this type served; null when the class has none. */
  share: number | null;
  p50Ms: number | null;
  p99Ms: number | null;
}

export interface InstanceTypeRow extends SizeRow {
  /** `unknown` for answers from a backend whose heartbeat named no type (none expected). */
  instanceType: string;
  backends: number;
  pricePerHour: number;
  small: SizeRow;
  large: SizeRow;
}

export interface ClassTotals {
  answered: number;
  failed: number;
}

/** One heterogeneous service's requests by the instance type that served them, split by query size. */
export interface TypedSummary {
  /** A query of more items than this is large; null when no query is (another type serves every one within QoS). */
  largeAbove: number | null;
  /** What `largeAbove` is, in words. */
  largeRule: string;
  /** The type that serves every query within QoS (libs/kairos's base type). */
  baseType: string;
  small: ClassTotals;
  large: ClassTotals;
  types: InstanceTypeRow[];
}

export interface TypeInfo {
  name: string;
  backends: number;
  pricePerHour: number;
}

type Size = "small" | "large";

const round1 = (x: number): number | null => (Number.isFinite(x) ? Number(x.toFixed(1)) : null);
const ratio = (n: number, of: number): number | null => (of === 0 ? null : Number((n / of).toFixed(5)));

/**
 * Outcomes of one service's queries by the backend that answered them and by size; types are resolved at
 * the end (a backend's type comes from its heartbeats, which may come after its first answer).
 */
export class TypedStats {
  private readonly byBackend = new Map<string, Record<Size, LatencyHistogram>>();
  private readonly totals: Record<Size, ClassTotals> = { small: { answered: 0, failed: 0 }, large: { answered: 0, failed: 0 } };

  constructor(private readonly isLarge: (batch: number) => boolean) {}

  record(batch: number, outcome: Outcome, latencyMs: number): void {
    const size: Size = this.isLarge(batch) ? "large" : "small";
    if (!outcome.ok) {
      this.totals[size].failed++;
      return;
    }
    this.totals[size].answered++;
    const id = outcome.backendId ?? "";
    let h = this.byBackend.get(id);
    if (h === undefined) {
      h = { small: new LatencyHistogram(), large: new LatencyHistogram() };
      this.byBackend.set(id, h);
    }
    h[size].record(Math.max(0, latencyMs));
  }

  /** Per type, in the order given; a row `unknown` only if some answering backend's type is not known. */
  summary(
    types: readonly TypeInfo[],
    typeOf: (backendId: string) => string | undefined,
    rule: { largeAbove: number; largeRule: string; baseType: string },
  ): TypedSummary {
    const merged = new Map<string, Record<Size, LatencyHistogram>>(
      types.map((t) => [t.name, { small: new LatencyHistogram(), large: new LatencyHistogram() }]),
    );
    for (const [id, h] of this.byBackend) {
      const type = typeOf(id);
      const name = type !== undefined && merged.has(type) ? type : "unknown";
      let m = merged.get(name);
      if (m === undefined) {
        m = { small: new LatencyHistogram(), large: new LatencyHistogram() };
        merged.set(name, m);
      }
      m.small.merge(h.small);
      m.large.merge(h.large);
    }
    const answered = this.totals.small.answered + this.totals.large.answered;
    const row = (h: LatencyHistogram, of: number): SizeRow => ({
      answered: h.count,
      share: ratio(h.count, of),
      p50Ms: round1(h.percentile(50)),
      p99Ms: round1(h.percentile(99)),
    });
    const rows = [...merged].map(([name, h]): InstanceTypeRow => {
      const all = new LatencyHistogram();
      all.merge(h.small);
      all.merge(h.large);
      const info = types.find((t) => t.name === name);
      return {
        instanceType: name,
        backends: info?.backends ?? 0,
        pricePerHour: info?.pricePerHour ?? 0,
        ...row(all, answered),
        small: row(h.small, this.totals.small.answered),
        large: row(h.large, this.totals.large.answered),
      };
    });
    return {
      largeAbove: Number.isFinite(rule.largeAbove) ? rule.largeAbove : null,
      largeRule: rule.largeRule,
      baseType: rule.baseType,
      small: { ...this.totals.small },
      large: { ...this.totals.large },
      types: rows,
    };
  }
}
