import { checkSize, type PoolActuator, type PoolMember, ResizeError, type ResizeResult, type ScaleOptions } from "./actuator.js";

/** One instance type's pool: its own workload (or process group) of backends of that type. */
export interface TypedPool {
  instanceType: string;
  actuator: PoolActuator;
  /** The most backends of this type the pool may hold (the price list's maxCount); undefined = no limit of its own. */
  maxCount?: number;
}

/** What the split needs to know of one type's pool. */
export interface TypeSizing {
  instanceType: string;
  current: number;
  max?: number;
  /** How many of its backends the caller would like removed first (idle ones). */
  removable: number;
}

/**
 * Splits one pool size over the per-type pools, which are listed in the operator's order of preference.
 * A pool above its max is cut to it. Growing fills the types in that order up to each one's max (what
 * does not fit anywhere is not placed: the sum may come out below `total`). Shrinking first takes the
 * backends the caller marked removable, from the least preferred type up, then the least preferred
 * type's other backends. Types keep their sizes otherwise, so a resize touches as few pools as it can.
 * Pure; the order of the result is the order of `pools`.
 */
export function splitPoolSize(total: number, pools: readonly TypeSizing[]): Map<string, number> {
  checkSize(total);
  const cap = (p: TypeSizing) => p.max ?? Number.POSITIVE_INFINITY;
  const sizes = pools.map((p) => Math.min(p.current, cap(p)));
  const sum = () => sizes.reduce((a, b) => a + b, 0);
  for (let i = 0; i < pools.length && sum() < total; i++) {
    sizes[i] = Math.min(cap(pools[i] as TypeSizing), (sizes[i] as number) + total - sum());
  }
  const removable = pools.map((p, i) => Math.min(p.removable, sizes[i] as number));
  for (let i = pools.length - 1; i >= 0 && sum() > total; i--) {
    const take = Math.min(removable[i] as number, sum() - total);
    sizes[i] = (sizes[i] as number) - take;
  }
  for (let i = pools.length - 1; i >= 0 && sum() > total; i--) {
    sizes[i] = (sizes[i] as number) - Math.min(sizes[i] as number, sum() - total);
  }
  return new Map(pools.map((p, i) => [p.instanceType, sizes[i] as number]));
}

/**
 * One pool per instance type behind the one PoolActuator interface, so the allocator's pool manager
 * drives a heterogeneous cluster unchanged (`scaleTo` splits the size with `splitPoolSize`), while a
 * planner that chooses the mix itself (Kairos's configuration search) sets each type's size with
 * `scaleTypesTo`. Backends to remove first are handed only to the pool that holds them: on Kubernetes a
 * pod of another Deployment must not be marked.
 */
export class TypedPools implements PoolActuator {
  readonly kind: PoolActuator["kind"];
  private readonly pools: readonly TypedPool[];

  constructor(pools: readonly TypedPool[]) {
    const first = pools[0];
    if (!first) throw new Error("typed pools: at least one instance type is needed");
    const names = pools.map((p) => p.instanceType);
    const empty = names.findIndex((n) => n.trim() === "");
    if (empty >= 0) throw new Error(`typed pools: pool ${empty} has an empty instance type`);
    const twice = names.find((n, i) => names.indexOf(n) !== i);
    if (twice !== undefined) throw new Error(`typed pools: instance type ${twice} has two pools`);
    const other = pools.find((p) => p.actuator.kind !== first.actuator.kind);
    if (other)
      throw new Error(`typed pools: ${other.instanceType} is ${other.actuator.kind}, ${first.instanceType} is ${first.actuator.kind}`);
    for (const p of pools) if (p.maxCount !== undefined) checkSize(p.maxCount);
    this.kind = first.actuator.kind;
    this.pools = [...pools];
  }

  /** The instance types, in the order of preference the pools were given in. */
  types(): string[] {
    return this.pools.map((p) => p.instanceType);
  }

  /** Each type's requested size. */
  async currentSizes(): Promise<Map<string, number>> {
    const sizes = await Promise.all(this.pools.map((p) => p.actuator.currentSize()));
    return new Map(this.pools.map((p, i) => [p.instanceType, sizes[i] ?? 0]));
  }

  async currentSize(): Promise<number> {
    let sum = 0;
    for (const n of (await this.currentSizes()).values()) sum += n;
    return sum;
  }

  /** Each type's members. */
  async membersByType(): Promise<Map<string, PoolMember[]>> {
    const members = await Promise.all(this.pools.map((p) => p.actuator.members()));
    return new Map(this.pools.map((p, i) => [p.instanceType, members[i] ?? []]));
  }

  async members(): Promise<PoolMember[]> {
    return [...(await this.membersByType()).values()].flat();
  }

  /**
   * Sets the size of the types named (the others are left alone). An unknown type or a size above the
   * type's max is refused before anything is resized.
   */
  async scaleTypesTo(sizes: Readonly<Record<string, number>> | ReadonlyMap<string, number>, options: ScaleOptions = {}): Promise<void> {
    const wanted = sizes instanceof Map ? [...sizes] : Object.entries(sizes);
    for (const [type, n] of wanted) {
      const pool = this.pools.find((p) => p.instanceType === type);
      if (!pool) throw new Error(`typed pools: no pool for instance type ${type} (have: ${this.types().join(", ")})`);
      checkSize(n);
      if (pool.maxCount !== undefined && n > pool.maxCount)
        throw new Error(`typed pools: ${type} may hold at most ${pool.maxCount}, asked for ${n}`);
    }
    const removeFirst = new Set(options.removeFirst ?? []);
    const byType = removeFirst.size > 0 ? await this.membersByType() : new Map<string, PoolMember[]>();
    await Promise.all(
      wanted.map(([type, n]) => {
        const pool = this.pools.find((p) => p.instanceType === type) as TypedPool;
        const mine = (byType.get(type) ?? []).map((m) => m.id).filter((id) => removeFirst.has(id));
        return pool.actuator.scaleTo(n, mine.length > 0 ? { removeFirst: mine } : {});
      }),
    );
  }

  /** One size for the whole pool, split over the types by `splitPoolSize`. */
  async scaleTo(n: number, options: ScaleOptions = {}): Promise<void> {
    checkSize(n);
    const [sizes, byType] = await Promise.all([this.currentSizes(), this.membersByType()]);
    const removeFirst = new Set(options.removeFirst ?? []);
    const split = splitPoolSize(
      n,
      this.pools.map((p) => ({
        instanceType: p.instanceType,
        current: sizes.get(p.instanceType) ?? 0,
        ...(p.maxCount !== undefined ? { max: p.maxCount } : {}),
        removable: (byType.get(p.instanceType) ?? []).filter((m) => removeFirst.has(m.id) && !m.terminating).length,
      })),
    );
    const changed = new Map([...split].filter(([type, size]) => size !== sizes.get(type)));
    await this.scaleTypesTo(changed, options);
  }

  /** Resizes a member in place through the pool of its type (the only one that holds it). */
  async resize(memberId: string, cores: number, maxBatch?: number): Promise<ResizeResult> {
    for (const [type, members] of await this.membersByType()) {
      if (members.some((m) => m.id === memberId)) {
        const pool = this.pools.find((p) => p.instanceType === type) as TypedPool;
        return pool.actuator.resize(memberId, cores, maxBatch);
      }
    }
    throw new ResizeError(`resizing ${memberId}: no pool of ${this.types().join(", ")} holds it (gone?)`, "gone");
  }

  async close(): Promise<void> {
    await Promise.all(this.pools.map((p) => p.actuator.close()));
  }
}
