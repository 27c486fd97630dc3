/**
 * Which loaned backends to take back when inference needs `needed` of them (FaPES §3, FaPES-Manager).
 *
 * A loaned backend (FaPES's server) runs the best-effort jobs listed on it. Taking it back preempts every one of
 * them: each checkpoints and stops on all the backends it holds, and a backend whose jobs are all preempted can
 * be taken at no further cost. So the choices depend on each other, and the cost of a plan is the number of
 * distinct jobs it preempts. A backend loaned but running nothing costs nothing.
 */
import type { Random } from "@infergrid/core";

/** A loaned backend and the best-effort jobs running on it (none: loaned, but idle). */
export interface LoanedServer {
  readonly id: string;
  readonly jobs: readonly string[];
}

export interface ReclaimPlan {
  /** The backends taken back, in the order chosen. */
  servers: string[];
  /** The jobs preempted, each once: the plan's cost. */
  preempted: string[];
}

export type ReclaimStrategy = "fapes-greedy" | "fewest-preemptions" | "random";

/** The plan of a strategy; `random` draws from `random`, the others are deterministic. */
export function planReclaim(strategy: ReclaimStrategy, servers: readonly LoanedServer[], needed: number, random: Random): ReclaimPlan {
  switch (strategy) {
    case "fapes-greedy":
      return fapesGreedyReclaim(servers, needed);
    case "fewest-preemptions":
      return fewestPreemptionsReclaim(servers, needed);
    case "random":
      return randomReclaim(servers, needed, random);
  }
}

/** The jobs a set of servers runs, each once. */
function jobsOf(servers: readonly LoanedServer[]): string[] {
  return [...new Set(servers.flatMap((s) => s.jobs))];
}

function allIn(s: LoanedServer, preempted: ReadonlySet<string>): boolean {
  return s.jobs.every((j) => preempted.has(j));
}

/**
 * FaPES's greedy choice. Idle loans first (they cost nothing). Then, repeatedly: take every backend the jobs
 * preempted so far have freed; if that is not enough, preempt the jobs of the backend with the largest reclaim
 * gain (how many backends become free at no further cost once its jobs are preempted, itself included) that is
 * not above what is still needed, ties by least reclaim cost (jobs on it not yet preempted), then by id. When
 * every gain is above the need (the paper is silent) the smallest gain is taken, ties again by cost: the fewest
 * backends disturbed beyond the need.
 */
export function fapesGreedyReclaim(servers: readonly LoanedServer[], needed: number): ReclaimPlan {
  const target = Math.max(0, Math.min(Math.floor(needed), servers.length));
  const order = [...servers].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const taken: string[] = [];
  const takenSet = new Set<string>();
  const preempted = new Set<string>();
  const preemptedOrder: string[] = [];
  const takeFree = () => {
    for (const s of order) {
      if (taken.length >= target) return;
      if (!takenSet.has(s.id) && allIn(s, preempted)) {
        taken.push(s.id);
        takenSet.add(s.id);
      }
    }
  };
  takeFree();
  while (taken.length < target) {
    const left = target - taken.length;
    let best: { s: LoanedServer; gain: number; cost: number } | undefined;
    for (const s of order) {
      if (takenSet.has(s.id)) continue;
      const cost = s.jobs.filter((j) => !preempted.has(j)).length;
      const after = new Set([...preempted, ...s.jobs]);
      let gain = 0;
      for (const r of order) if (!takenSet.has(r.id) && allIn(r, after)) gain++;
      if (best === undefined) {
        best = { s, gain, cost };
        continue;
      }
      const fits = gain <= left;
      const bestFits = best.gain <= left;
      let better: boolean;
      if (fits !== bestFits) better = fits;
      else if (fits) better = gain > best.gain || (gain === best.gain && cost < best.cost);
      else better = gain < best.gain || (gain === best.gain && cost < best.cost);
      if (better) best = { s, gain, cost };
    }
    if (best === undefined) break;
    for (const j of best.s.jobs) {
      if (!preempted.has(j)) {
        preempted.add(j);
        preemptedOrder.push(j);
      }
    }
    // The chosen backend first, then whatever else its jobs freed.
    taken.push(best.s.id);
    takenSet.add(best.s.id);
    takeFree();
  }
  return { servers: taken, preempted: preemptedOrder };
}

/** Jobs a plan would have to preempt for these servers, and whether they free at least `target`. */
function freedBy(servers: readonly LoanedServer[], preempted: ReadonlySet<string>): LoanedServer[] {
  return servers.filter((s) => allIn(s, preempted));
}

/**
 * The fewest preemptions there are, found by trying every set of jobs by increasing size (exact); ties by the
 * fewest backends disturbed (those running a preempted job), then by the greedy's order. Used when at most
 * `maxExactJobs` jobs run on the loaned backends; beyond that, FaPES's greedy.
 */
export function fewestPreemptionsReclaim(servers: readonly LoanedServer[], needed: number, maxExactJobs = 16): ReclaimPlan {
  const target = Math.max(0, Math.min(Math.floor(needed), servers.length));
  const jobs = jobsOf(servers).sort();
  if (jobs.length > maxExactJobs) return fapesGreedyReclaim(servers, needed);
  const best = bruteForceReclaim(servers, target);
  const preempted = new Set(best.preempted);
  const order = [...servers].sort((a, b) => {
    // Idle loans first, then backends of the preempted jobs with the fewest jobs, then by id.
    const d = a.jobs.length - b.jobs.length;
    return d !== 0 ? d : a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
  });
  const taken = order.filter((s) => allIn(s, preempted)).slice(0, target);
  return { servers: taken.map((s) => s.id), preempted: best.preempted };
}

/**
 * The least number of jobs whose preemption frees at least `needed` servers, by enumeration (2^jobs: for tests
 * and small cases). Ties: fewest servers disturbed, then the lexicographically first set of job names.
 */
export function bruteForceReclaim(servers: readonly LoanedServer[], needed: number): { preempted: string[]; disturbed: number } {
  const target = Math.max(0, Math.min(Math.floor(needed), servers.length));
  const jobs = jobsOf(servers).sort();
  const disturbedBy = (set: ReadonlySet<string>) => servers.filter((s) => s.jobs.some((j) => set.has(j))).length;
  for (let k = 0; k <= jobs.length; k++) {
    let best: { preempted: string[]; disturbed: number } | undefined;
    for (const combo of combinations(jobs, k)) {
      const set = new Set(combo);
      if (freedBy(servers, set).length < target) continue;
      const disturbed = disturbedBy(set);
      if (best === undefined || disturbed < best.disturbed) best = { preempted: combo, disturbed };
    }
    if (best !== undefined) return best;
  }
  return { preempted: jobs, disturbed: disturbedBy(new Set(jobs)) };
}

function* combinations<T>(items: readonly T[], k: number, from = 0): Generator<T[]> {
  if (k === 0) {
    yield [];
    return;
  }
  for (let i = from; i <= items.length - k; i++) {
    for (const rest of combinations(items, k - 1, i + 1)) yield [items[i] as T, ...rest];
  }
}

/** One-way loaning's reclaim (FaPES's baseline): idle loans first, then backends drawn at random. */
export function randomReclaim(servers: readonly LoanedServer[], needed: number, random: Random): ReclaimPlan {
  const target = Math.max(0, Math.min(Math.floor(needed), servers.length));
  const idle = servers.filter((s) => s.jobs.length === 0);
  const busy = servers.filter((s) => s.jobs.length > 0);
  for (let i = busy.length - 1; i > 0; i--) {
    const j = Math.floor(random.uniform() * (i + 1));
    const t = busy[i] as LoanedServer;
    busy[i] = busy[j] as LoanedServer;
    busy[j] = t;
  }
  const taken = [...idle, ...busy].slice(0, target);
  return { servers: taken.map((s) => s.id), preempted: jobsOf(taken) };
}
