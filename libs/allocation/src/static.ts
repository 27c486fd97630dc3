/**
 * The static allocation: every service gets a fixed share of the pool, independent of its load.
 * Pure: the allocator passes in what it knows (lists, free backends) and applies the result.
 */

export interface ServiceDemand {
  name: string;
  /** Kept in the list whenever the pool allows it. */
  minBackends: number;
  /** Hard cap on the list length; 0 = none (an equal share of the pool). */
  maxBackends: number;
  /** Entries the frontends keep warm from the start (Swayam bootstraps with 5). */
  initialBackends: number;
  /** The service's ordered list as it stands: only live backends, B_1 first. */
  currentList: readonly string[];
  /**
   * The backends this service may be given (a model profiled per instance type takes only backends of
   * those types); undefined = any. Entries already in its list are not checked again.
   */
  accepts?: (backendId: string) => boolean;
  /**
   * Per instance type, how many backends of it the list holds (Kairos's configuration for the service):
   * the list is given only backends of a type it is short of, and loses from its tail those of a type it
   * holds too many of. Its length is then at most the counts' sum. Undefined: no per-type counts.
   */
  typeCounts?: TypeCounts;
}

export interface TypeCounts {
  counts: ReadonlyMap<string, number>;
  typeOf: (backendId: string) => string | undefined;
}

export interface AllocationInput {
  services: readonly ServiceDemand[];
  /** Live backends in no list, sorted by id. */
  freeBackends: readonly string[];
  /** Live backends in total (free and assigned). */
  poolSize: number;
}

export interface ServicePlan {
  name: string;
  /** The new ordered list: the old entries in their old order (minus a trimmed tail), then the appended ones. */
  list: string[];
  /** What this policy would like the list to hold. */
  target: number;
  /**
   * Backends the service asks the pool to hold for it (what sizes the pool when the allocator
   * drives an actuator). An uncapped service takes an equal share of whatever pool there is, so it
   * asks only for what it keeps warm.
   */
  demand: number;
  /** What the service gets when the pool cannot give every service its target (max-min fair). */
  fairShare: number;
  /** Entries the frontends keep warm (their floor on n). */
  minWarm: number;
  added: string[];
  removed: string[];
}

export interface AllocationDecision {
  services: Map<string, ServicePlan>;
  lists: Map<string, string[]>;
  minWarm: Map<string, number>;
  /** Backends left in the pool after the plan, sorted by id. */
  free: string[];
}

/** Any policy the allocator can run: a smarter one (Faro) replaces the static one behind this type. */
export type AllocationPolicy = (input: AllocationInput) => AllocationDecision;

const byName = (a: { name: string }, b: { name: string }) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

/** The list length a service asks for: its cap, or else an equal share of the pool (never below its minimum). */
export function staticTarget(service: Pick<ServiceDemand, "minBackends" | "maxBackends">, poolSize: number, serviceCount: number): number {
  if (service.maxBackends > 0) return Math.max(service.maxBackends, service.minBackends);
  const share = serviceCount > 0 ? Math.floor(poolSize / serviceCount) : 0;
  return Math.max(share, service.minBackends);
}

/**
 * Max-min fair split of `capacity` units among services capped at their targets (water-filling).
 * A unit that cannot be split evenly goes first to a service that already holds it, so a plan
 * does not move a backend between two services that are equally entitled to it.
 */
export function fairShares(services: readonly { name: string; target: number; held: number }[], capacity: number): Map<string, number> {
  const shares = new Map(services.map((s) => [s.name, 0]));
  let remaining = Math.max(0, Math.floor(capacity));
  let active = services.filter((s) => s.target > 0);
  while (remaining > 0 && active.length > 0) {
    const each = Math.floor(remaining / active.length);
    if (each === 0) {
      const order = [...active].sort((a, b) => {
        const aHolds = a.held > (shares.get(a.name) ?? 0) ? 0 : 1;
        const bHolds = b.held > (shares.get(b.name) ?? 0) ? 0 : 1;
        return aHolds - bHolds || byName(a, b);
      });
      for (const s of order.slice(0, remaining)) shares.set(s.name, (shares.get(s.name) ?? 0) + 1);
      remaining = 0;
      break;
    }
    for (const s of active) {
      const have = shares.get(s.name) ?? 0;
      const give = Math.min(each, s.target - have);
      shares.set(s.name, have + give);
      remaining -= give;
    }
    active = active.filter((s) => (shares.get(s.name) ?? 0) < s.target);
  }
  return shares;
}

/**
 * Plans every service's ordered list. Rules, in order:
 *  1. a list longer than the service's hard cap (max_backends) loses its tail;
 *  2. free backends are appended round-robin over services in name order, each up to its fair
 *     share, so that under scarcity each service gets about the same;
 *  3. a service still below its fair share takes backends from the tail of the service furthest
 *     above its own (reclamation happens only when someone is short: a service may keep more
 *     than an equal share while nobody else needs it, which spares in-use backends needless churn);
 *  4. existing entries never move: lists only lose their tail or grow at the end;
 *  5. a service with `accepts` is given (or reclaims) only backends it accepts, and its share is capped
 *     at how many of those exist;
 *  6. a service with `typeCounts` first loses the tail entries of a type it holds too many of, is given
 *     only backends of a type it is short of, and its share is capped at the counts' sum.
 */
export function planStaticAllocation(input: AllocationInput): AllocationDecision {
  const services = [...input.services].sort(byName);
  const inLists = new Set(services.flatMap((s) => s.currentList));
  const free = [...new Set(input.freeBackends)].filter((b) => !inLists.has(b));
  const lists = new Map(services.map((s) => [s.name, [...s.currentList]]));
  const listOf = (name: string): string[] => lists.get(name) ?? [];

  for (const s of services) {
    const list = listOf(s.name);
    if (s.maxBackends > 0 && list.length > s.maxBackends) {
      free.push(...list.splice(s.maxBackends));
    }
    if (s.typeCounts) free.push(...trimToTypeCounts(list, s.typeCounts));
  }
  free.sort();

  const targets = new Map(services.map((s) => [s.name, staticTarget(s, input.poolSize, services.length)]));
  const available = free.length + services.reduce((n, s) => n + listOf(s.name).length, 0);
  const shortOf = (s: ServiceDemand, id: string) => {
    if (s.typeCounts === undefined) return true;
    const { counts, typeOf } = s.typeCounts;
    const type = typeOf(id);
    if (type === undefined) return false;
    return listOf(s.name).filter((b) => typeOf(b) === type).length < (counts.get(type) ?? 0);
  };
  const takes = (s: ServiceDemand, id: string) => (s.accepts === undefined || s.accepts(id)) && shortOf(s, id);
  // A service that takes only some backends is never entitled to more than exist of them: the rest of
  // its share goes to the others instead of sitting free.
  const reachable = (s: ServiceDemand) => {
    if (s.typeCounts) return [...s.typeCounts.counts.values()].reduce((a, b) => a + b, 0);
    if (s.accepts === undefined) return Number.POSITIVE_INFINITY;
    const own = listOf(s.name);
    const mine = new Set(own);
    const elsewhere = services.flatMap((d) => (d.name === s.name ? [] : listOf(d.name)));
    return own.length + [...free, ...elsewhere].filter((id) => !mine.has(id) && takes(s, id)).length;
  };
  const shares = fairShares(
    services.map((s) => ({ name: s.name, target: Math.min(targets.get(s.name) ?? 0, reachable(s)), held: listOf(s.name).length })),
    available,
  );
  const shareOf = (name: string) => shares.get(name) ?? 0;

  // The first free backend the service accepts, preferring one that no other service still short of its
  // share is restricted to: an unrestricted service should not take the few backends a profiled one can use.
  const pick = (s: ServiceDemand): number => {
    const wantedElsewhere = (id: string) =>
      services.some(
        (d) =>
          d !== s && (d.accepts !== undefined || d.typeCounts !== undefined) && listOf(d.name).length < shareOf(d.name) && takes(d, id),
      );
    const spare = free.findIndex((id) => takes(s, id) && !wantedElsewhere(id));
    return spare >= 0 ? spare : free.findIndex((id) => takes(s, id));
  };

  // Round-robin: one backend per service per round, so scarcity is shared out evenly.
  let gaveOne = true;
  while (free.length > 0 && gaveOne) {
    gaveOne = false;
    for (const s of services) {
      const list = listOf(s.name);
      if (free.length === 0) break;
      if (list.length >= shareOf(s.name)) continue;
      const i = pick(s);
      if (i < 0) continue;
      list.push(free.splice(i, 1)[0] as string);
      gaveOne = true;
    }
  }

  let moved = true;
  while (moved) {
    moved = false;
    for (const s of services) {
      const list = listOf(s.name);
      if (list.length >= shareOf(s.name)) continue;
      let donor: ServiceDemand | undefined;
      let excess = 0;
      for (const d of services) {
        const tail = listOf(d.name).at(-1);
        const e = listOf(d.name).length - shareOf(d.name);
        if (e > excess && tail !== undefined && takes(s, tail)) {
          donor = d;
          excess = e;
        }
      }
      if (!donor) continue;
      list.push(listOf(donor.name).pop() as string);
      moved = true;
    }
  }

  const decision: AllocationDecision = { services: new Map(), lists: new Map(), minWarm: new Map(), free: [...free].sort() };
  for (const s of services) {
    const list = listOf(s.name);
    const before = new Set(s.currentList);
    const after = new Set(list);
    const plan: ServicePlan = {
      name: s.name,
      list,
      target: targets.get(s.name) ?? 0,
      demand: s.maxBackends > 0 ? (targets.get(s.name) ?? 0) : Math.max(s.minBackends, s.initialBackends),
      fairShare: shareOf(s.name),
      minWarm: Math.min(s.initialBackends, list.length),
      added: list.filter((b) => !before.has(b)),
      removed: s.currentList.filter((b) => !after.has(b)),
    };
    decision.services.set(s.name, plan);
    decision.lists.set(s.name, list);
    decision.minWarm.set(s.name, plan.minWarm);
  }
  return decision;
}

/** Removes (and returns) the tail entries of each type the list holds more of than `typeCounts` says. */
function trimToTypeCounts(list: string[], { counts, typeOf }: TypeCounts): string[] {
  const kept = new Map<string, number>();
  const keep: string[] = [];
  const dropped: string[] = [];
  for (const id of list) {
    const type = typeOf(id) ?? "";
    const n = kept.get(type) ?? 0;
    if (n < (counts.get(type) ?? 0)) {
      kept.set(type, n + 1);
      keep.push(id);
    } else dropped.push(id);
  }
  list.splice(0, list.length, ...keep);
  return dropped;
}
