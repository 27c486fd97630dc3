/**
 * One step of loaning (FaPES §3, loan and reclaim events): inference first, the rest of the pool to best-effort
 * jobs, and when inference needs more than it holds, loaned backends back with the fewest preemptions.
 *
 * The caller says how many backends inference must hold now (its plan's demand and the headroom it keeps, see
 * headroom.ts); everything beyond that may be loaned. A backend being returned (its job checkpointing within
 * the grace period) already counts as inference's, and inference plans its lists only over backends that are
 * free: a reclaimed backend joins a list once its job has let go of it, so the fast loop never waits on one.
 */
import type { Random } from "@infergrid/core";
import { type LoanedServer, planReclaim, type ReclaimPlan, type ReclaimStrategy } from "./reclaim.js";

/** A best-effort job as the loan planner sees it. */
export interface LoanJob {
  readonly name: string;
  /** Higher first. */
  readonly priority: number;
  /** Ties in priority: earlier first. */
  readonly submittedAtMs: number;
  /** It starts only with at least this many backends. */
  readonly minBackends: number;
  readonly maxBackends: number;
  /** Backends loaned to it now (not those being returned). */
  readonly held: number;
  /** Items not done: it can use at most this many backends. */
  readonly remaining: number;
}

export interface LoanInput {
  /** Live backends: in lists, loaned, being returned and free alike. */
  readonly live: number;
  /** Backends inference must hold now. */
  readonly inferenceNeed: number;
  /** Loaned backends (not being returned), each with the jobs running on it (none: loaned, idle). */
  readonly loans: readonly LoanedServer[];
  /** Loaned backends on their way back (within their grace period). */
  readonly returning: number;
  /** Backends in no list and not loaned, in the order to loan them. */
  readonly free: readonly string[];
  readonly jobs: readonly LoanJob[];
  /**
   * Backends left beyond the need before anything new is lent (default 0). Loans are taken back only when the
   * need exceeds what inference holds, so a rise of the need by up to `spare` is met by a backend inference
   * already holds, not by a preemption, and a fall by as much lends nothing (FLOORS_SPARE).
   */
  readonly spare?: number;
}

export interface LoanSettings {
  readonly strategy: ReclaimStrategy;
  readonly random: Random;
}

export interface LoanDecision {
  /** New loans: a free backend to a job. */
  loans: { backend: string; job: string }[];
  /** Loans to end now because inference needs the backends; `preempted` are the jobs this interrupts. */
  reclaim: ReclaimPlan;
  /** Idle loans given back because their job has nothing left for them (no job is interrupted). */
  released: string[];
  /**
   * Backends inference should give up from its lists (beyond what it needs) because jobs want more than is free:
   * they are lent once they have left the lists and drained.
   */
  toFree: number;
  /** Backends inference may plan its lists over: live less what stays loaned, what is being returned and `toFree`. */
  inferencePool: number;
}

/**
 * How many backends inference must hold now. `plan`: what the slow loop's plan asks for (FaPES lends everything
 * beyond its inference jobs' min_scale). `plan-headroom` (the default with a slow loop that plans from the load):
 * the plan plus the learned headroom. `plan-in-use-headroom` (the default with a static split, whose plan does not
 * follow the load): the larger of the plan and the backends inference uses now, plus the headroom, so that the
 * fast loop's burst room is lent only where it is not used. `floors` (this system's default with a slow loop): the
 * sum of the per-service floors (floors.ts), passed as `plan`; the lists are planned with the shares raised to
 * them and FLOORS_SPARE backends of hysteresis (LoanInput.spare).
 */
export type NeedRule = "floors" | "plan" | "plan-headroom" | "plan-in-use-headroom";

export const NEED_RULES: readonly NeedRule[] = ["floors", "plan", "plan-headroom", "plan-in-use-headroom"];

/**
 * The spare backends of hysteresis the `floors` rule keeps (LoanInput.spare). Chosen on fapes-48 (seed 1: spare 0,
 * 1, 2 gave 136, 83, 47 preemptions at 0.044, 0.041, 0.042 % violations and 55.2, 54.2, 53.5 % busy
 * utilisation): Faro's re-solves every 5 minutes move a few backends between services, and the per-service hold
 * keeps the service that lost them at its floor, so each re-solve raises the floors' sum by a backend or two.
 */
export const FLOORS_SPARE = 2;

export function inferenceNeed(rule: NeedRule, plan: number, inUse: number, headroom: number): number {
  switch (rule) {
    case "floors":
    case "plan":
      return plan;
    case "plan-headroom":
      return plan + headroom;
    case "plan-in-use-headroom":
      return Math.max(plan, inUse) + headroom;
  }
}

/** Jobs in the order they get backends: priority, then arrival, then name. */
export function loanOrder<J extends Pick<LoanJob, "name" | "priority" | "submittedAtMs">>(jobs: readonly J[]): J[] {
  return [...jobs].sort(
    (a, b) => b.priority - a.priority || a.submittedAtMs - b.submittedAtMs || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0),
  );
}

/** How many backends a job can use at most now. */
export function jobWants(j: LoanJob): number {
  return Math.max(0, Math.min(j.maxBackends, j.remaining));
}

export function planLoans(input: LoanInput, settings: LoanSettings): LoanDecision {
  const lendable = Math.max(0, input.live - input.returning - input.inferenceNeed);
  // Idle loans of jobs that cannot use them are given back first: free for inference or another job.
  const released = input.loans.filter((l) => l.jobs.length === 0).map((l) => l.id);
  const kept = input.loans.filter((l) => l.jobs.length > 0);
  let reclaim: ReclaimPlan = { servers: [], preempted: [] };
  if (kept.length > lendable) reclaim = planReclaim(settings.strategy, kept, kept.length - lendable, settings.random);
  const reclaimed = new Set(reclaim.servers);
  const stay = kept.filter((l) => !reclaimed.has(l.id));
  const loans: { backend: string; job: string }[] = [];
  let room = lendable - stay.length - Math.max(0, input.spare ?? 0);
  const free = [...input.free, ...released];
  let next = 0;
  let unmet = 0;
  if (room > 0 && reclaim.servers.length === 0) {
    const held = new Map<string, number>();
    for (const l of stay) for (const j of l.jobs) held.set(j, (held.get(j) ?? 0) + 1);
    const order = loanOrder(input.jobs);
    const give = (job: string, n: number) => {
      for (let i = 0; i < n && next < free.length && room > 0; i++) {
        loans.push({ backend: free[next] as string, job });
        next++;
        room--;
        held.set(job, (held.get(job) ?? 0) + 1);
      }
    };
    // First every waiting job that can start gets its minimum (in order; one that cannot start does not
    // block a later, smaller one), then each job grows towards what it can use, in the same order.
    for (const j of order) {
      const has = held.get(j.name) ?? 0;
      if (has > 0 || jobWants(j) === 0) continue;
      const min = Math.max(1, Math.min(j.minBackends, jobWants(j)));
      if (min <= Math.min(room, free.length - next)) give(j.name, min);
    }
    for (const j of order) {
      const has = held.get(j.name) ?? 0;
      if (has === 0) continue;
      give(j.name, jobWants(j) - has);
    }
    for (const j of order) unmet += Math.max(0, jobWants(j) - (held.get(j.name) ?? 0));
  }
  const toFree = Math.max(0, Math.min(room, unmet));
  const loanedReleased = new Set(loans.map((l) => l.backend));
  return {
    loans,
    reclaim,
    released: released.filter((id) => !loanedReleased.has(id)),
    toFree,
    inferencePool: input.live - input.returning - reclaim.servers.length - stay.length - loans.length - toFree,
  };
}
