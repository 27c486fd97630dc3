/**
 * The dynamic program Themis's Algorithms 1 and 2 share (section 4.4): split an integer-ms SLO budget across
 * the stages of a pipeline so that the summed cost is least. Each stage offers options, each with a cost (cores
 * in total) and a latency in whole ms; the DP runs over (stage, ms used so far), O(|S| * SLO * options).
 *
 * API: `cheapestWithinBudget(stages, budgetMs)` -> `{ picks, cost, budgetMs }` or undefined when no choice of
 * one option per stage fits. Among equally cheap choices the one using the least budget wins; within a stage,
 * equal (cost, budget) options keep the one listed first, so callers list options in their preferred order.
 */

export interface DpOption<T> {
  cost: number;
  /** Whole ms of the budget this option uses. */
  budgetMs: number;
  value: T;
}

export interface DpResult<T> {
  picks: T[];
  cost: number;
  budgetMs: number;
}

/**
 * Only options not dominated by another (no more cost and no more budget) can be in an optimum, so the DP runs
 * over each stage's Pareto front: a few options instead of b_max * c_max.
 */
function paretoFront<T>(options: readonly DpOption<T>[], budget: number): DpOption<T>[] {
  const fitting = options
    .map((o, i) => ({ o, i }))
    .filter(({ o }) => o.budgetMs <= budget && Number.isFinite(o.cost))
    .sort((a, b) => a.o.budgetMs - b.o.budgetMs || a.o.cost - b.o.cost || a.i - b.i);
  const front: DpOption<T>[] = [];
  let cheapest = Number.POSITIVE_INFINITY;
  for (const { o } of fitting) {
    if (o.cost < cheapest) {
      front.push(o);
      cheapest = o.cost;
    }
  }
  return front;
}

export function cheapestWithinBudget<T>(stages: readonly (readonly DpOption<T>[])[], budgetMs: number): DpResult<T> | undefined {
  const budget = Math.floor(budgetMs);
  if (stages.length === 0 || budget < 0) return undefined;
  const fronts = stages.map((s) => paretoFront(s, budget));
  const width = budget + 1;
  // cost[t]: least cost of the stages so far using exactly t ms; choice[s][t]: the option stage s took there.
  let cost = new Float64Array(width).fill(Number.POSITIVE_INFINITY);
  const choice: Int32Array[] = [];
  const first = fronts[0] ?? [];
  const pick0 = new Int32Array(width).fill(-1);
  first.forEach((o, k) => {
    if (o.cost < (cost[o.budgetMs] ?? Number.POSITIVE_INFINITY)) {
      cost[o.budgetMs] = o.cost;
      pick0[o.budgetMs] = k;
    }
  });
  choice.push(pick0);
  for (let s = 1; s < fronts.length; s++) {
    const front = fronts[s] ?? [];
    const next = new Float64Array(width).fill(Number.POSITIVE_INFINITY);
    const pick = new Int32Array(width).fill(-1);
    for (let t = 0; t < width; t++) {
      const base = cost[t] ?? Number.POSITIVE_INFINITY;
      if (base === Number.POSITIVE_INFINITY) continue;
      for (let k = 0; k < front.length; k++) {
        const o = front[k];
        if (o === undefined) continue;
        const u = t + o.budgetMs;
        if (u >= width) break; // the front is sorted by budget
        const c = base + o.cost;
        if (c < (next[u] ?? Number.POSITIVE_INFINITY)) {
          next[u] = c;
          pick[u] = k;
        }
      }
    }
    cost = next;
    choice.push(pick);
  }
  let bestT = -1;
  for (let t = 0; t < width; t++) {
    const c = cost[t] ?? Number.POSITIVE_INFINITY;
    if (c < Number.POSITIVE_INFINITY && (bestT < 0 || c < (cost[bestT] ?? Number.POSITIVE_INFINITY))) bestT = t;
  }
  if (bestT < 0) return undefined;
  const total = cost[bestT] ?? Number.POSITIVE_INFINITY;
  const picks: T[] = [];
  let t = bestT;
  for (let s = fronts.length - 1; s >= 0; s--) {
    const k = choice[s]?.[t] ?? -1;
    const o = fronts[s]?.[k];
    if (o === undefined) throw new Error(`pipeline DP lost its path at stage ${s}, ${t} ms`);
    picks.unshift(o.value);
    t -= o.budgetMs;
  }
  return { picks, cost: total, budgetMs: bestT };
}
