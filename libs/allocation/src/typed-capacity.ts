/**
 * Kairos combined with the cross-service objective: the slow loop's shares become shares of the cluster's
 * cost budget, and each service profiled per instance type spends its share on the mix Kairos picks for
 * it (one base instance of the type that serves its large queries, cheap ones for the small). The sum of
 * the services' mixes is what each type's pool is sized to, and each service's mix is the per-type count
 * of its list. Pure: the allocator passes in the shares, the specs' profiles and the price list.
 */
import { type InstanceTypeSpec, type ServiceConfiguration, type ServiceModel, serviceConfiguration } from "@infergrid/kairos";

export interface TypedService {
  name: string;
  model: ServiceModel;
  /** Its share of the cluster from the slow loop, in any unit (only the ratios count). */
  share: number;
  /** Its recent query sizes; undefined: Kairos's production mix is assumed. */
  batches?: readonly number[];
}

export interface TypedCapacityPlan {
  /** Per service, the configuration its share of the budget buys. */
  services: Map<string, ServiceConfiguration>;
  /** Per instance type of the price list (0 included), the backends the pool should hold. */
  totals: Map<string, number>;
  costPerHour: number;
  /** Services left without a configuration, and why. */
  problems: Map<string, string>;
}

/**
 * Splits `budgetPerHour` over `services` in proportion to their shares (equally when no share is set)
 * and picks each one's configuration within its part, largest share first (then by name, so the split is
 * deterministic). Before a service spends its part, one base instance (its price and the instance) is set
 * aside for each service after it: a part too small for one base instance is raised to one, and a large
 * share cannot take the last base instances, so no registered service that can be served is left with
 * nothing.
 */
export function planTypedCapacity(
  services: readonly TypedService[],
  prices: readonly InstanceTypeSpec[],
  budgetPerHour: number,
): TypedCapacityPlan {
  const shareSum = services.reduce((s, x) => s + Math.max(0, x.share), 0);
  const part = (s: TypedService) => (shareSum > 0 ? (budgetPerHour * Math.max(0, s.share)) / shareSum : budgetPerHour / services.length);
  const plan: TypedCapacityPlan = {
    services: new Map(),
    totals: new Map(prices.map((p) => [p.name, 0])),
    costPerHour: 0,
    problems: new Map(),
  };
  const order = [...services].sort((a, b) => b.share - a.share || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  // Each service's least configuration: one base instance.
  const least = new Map<string, ServiceConfiguration>();
  for (const s of order) {
    try {
      least.set(s.name, serviceConfiguration(s.model, prices, 0, { atLeastOneBase: true, ...(s.batches ? { batches: s.batches } : {}) }));
    } catch (err) {
      plan.problems.set(s.name, (err as Error).message);
    }
  }
  const servable = order.filter((s) => least.has(s.name));
  const left = new Map(prices.map((p) => [p.name, p.maxCount]));
  for (const [i, s] of servable.entries()) {
    const later = servable.slice(i + 1).flatMap((o) => {
      const c = least.get(o.name);
      return c ? [c] : [];
    });
    const reservedCost = later.reduce((sum, c) => sum + c.costPerHour, 0);
    const limits = new Map(left);
    for (const c of later) limits.set(c.base, (limits.get(c.base) ?? 0) - 1);
    const room = budgetPerHour - plan.costPerHour - reservedCost;
    let c: ServiceConfiguration;
    try {
      c = serviceConfiguration(s.model, prices, Math.min(part(s), room), {
        limits,
        atLeastOneBase: true,
        ...(s.batches ? { batches: s.batches } : {}),
      });
    } catch (err) {
      plan.problems.set(s.name, (err as Error).message);
      continue;
    }
    if (plan.costPerHour + c.costPerHour > budgetPerHour + 1e-9) {
      plan.problems.set(
        s.name,
        `one ${c.base} (${c.costPerHour} USD/h) does not fit what is left of the ${budgetPerHour} USD/h budget (${(budgetPerHour - plan.costPerHour).toFixed(3)})`,
      );
      continue;
    }
    plan.services.set(s.name, c);
    plan.costPerHour += c.costPerHour;
    for (const [type, n] of c.counts) {
      plan.totals.set(type, (plan.totals.get(type) ?? 0) + n);
      left.set(type, (left.get(type) ?? 0) - n);
    }
  }
  return plan;
}
