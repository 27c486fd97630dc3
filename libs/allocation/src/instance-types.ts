/**
 * Heterogeneous pools (Kairos, issue #15), the allocator's side: what the cluster's backends of each
 * instance type cost, and which backends a service whose model is profiled per instance type may be
 * given. Pure: the allocator passes in what its heartbeats say.
 */

import type { InstanceTypeSpec } from "@infergrid/kairos";

/** One entry of the allocator's price list: a Kairos catalogue's type (name, price, the most the pool may hold). */
export type InstanceTypePrice = InstanceTypeSpec;

export interface TypedBackend {
  /** As the backend reports it ("" when it reports none). */
  instanceType: string;
  /** In some service's list. */
  assigned: boolean;
}

export interface InstanceTypeCount {
  instanceType: string;
  backends: number;
  assigned: number;
  pricePerHour: number;
  costPerHour: number;
}

export interface InstanceTypeSummary {
  /** Every type that has a live backend, by name; a type of the price list with none is left out. */
  types: InstanceTypeCount[];
  costPerHour: number;
}

/**
 * Live backends counted per instance type with what they cost per hour. A type the price list does not
 * name (or a backend that reports no type) is still counted, at price 0: the operator sees it in the
 * cluster state rather than having it vanish from the totals.
 */
export function summarizeInstanceTypes(backends: readonly TypedBackend[], prices: readonly InstanceTypePrice[]): InstanceTypeSummary {
  const price = new Map(prices.map((p) => [p.name, p.pricePerHour]));
  const counts = new Map<string, { backends: number; assigned: number }>();
  for (const b of backends) {
    const c = counts.get(b.instanceType) ?? { backends: 0, assigned: 0 };
    c.backends += 1;
    if (b.assigned) c.assigned += 1;
    counts.set(b.instanceType, c);
  }
  const types = [...counts]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([instanceType, c]) => {
      const pricePerHour = price.get(instanceType) ?? 0;
      return { instanceType, ...c, pricePerHour, costPerHour: c.backends * pricePerHour };
    });
  return { types, costPerHour: types.reduce((sum, t) => sum + t.costPerHour, 0) };
}

/**
 * Which backends a service may be given: with per-type profiles, only backends of a profiled type (a
 * backend of another type would have no service time to draw and no place in the frontends' matching);
 * without, any. Returns undefined for "any", so callers can skip the check.
 */
export function instanceTypeFilter(
  profiledTypes: readonly string[],
  typeOf: (backendId: string) => string | undefined,
): ((backendId: string) => boolean) | undefined {
  if (profiledTypes.length === 0) return undefined;
  const allowed = new Set(profiledTypes);
  return (id) => {
    const t = typeOf(id);
    return t !== undefined && allowed.has(t);
  };
}
