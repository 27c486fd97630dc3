/**
 * Swayam's clairvoyant baselines (libs/baselines clairvoyant.ts) in the simulator: each request is scheduled
 * at its latest start meeting the SLO and served by its job's ClairvoyantPool. The cluster capacity holds:
 * a request that finds no free backend and no room waits for the next backend to free (ClairA2 first evicts
 * another job's idle backend, which a clairvoyant would do); it then starts late and may miss its SLO.
 * The check counts the backends alive at a request's start; ClairA2 charges a new backend's set-up to the
 * time before it, which no check then can bound: where the capacity binds, ClairA2's backend-seconds exceed
 * it (the faro-N experiments leave both clairvoyants out).
 */
import { ClairvoyantPool, clairvoyantStart, type Occupancy } from "@infergrid/baselines";
import { type ClusterModel, FIRST_MODEL_EVENT, type Simulation } from "./engine.js";

const START = FIRST_MODEL_EVENT;
const DONE = FIRST_MODEL_EVENT + 1;

export class ClairvoyantCluster implements ClusterModel {
  private readonly pools: ClairvoyantPool[];
  private readonly waiting: number[] = [];
  private waitHead = 0;
  private readonly fixedMs: number;

  constructor(private readonly sim: Simulation) {
    const p = sim.config.policy;
    if (p.kind !== "clairvoyant") throw new Error("ClairvoyantCluster runs the clairvoyant baselines");
    this.pools = sim.config.jobs.map(
      () => new ClairvoyantPool({ variant: p.variant, setupMs: sim.config.coldStartMs, idleTimeoutMs: sim.config.idleTimeoutMs }),
    );
    this.fixedMs = 4 * sim.config.hopMs;
  }

  start(): void {}

  arrive(req: number): void {
    const sim = this.sim;
    const r = sim.requests;
    const job = sim.jobs[r.job[req] as number];
    const at = clairvoyantStart(sim.now, r.service[req] as number, job?.sloMs ?? 0, this.fixedMs);
    sim.schedule(at, START, req);
  }

  private record(job: number, intervals: readonly Occupancy[]): void {
    for (const o of intervals) this.sim.metrics.occupancy(job, o.from, o.to);
  }

  private inUse(): number {
    let n = 0;
    for (const p of this.pools) n += p.size;
    return n;
  }

  /** Starts req now if a backend can be had; false if the cluster is full. */
  private tryStart(req: number): boolean {
    const sim = this.sim;
    const now = sim.now;
    const j = sim.requests.job[req] as number;
    const pool = this.pools[j] as ClairvoyantPool;
    this.record(j, pool.collect(now));
    if (!pool.hasFree(now) && this.inUse() >= sim.config.capacity) {
      // Other jobs' backends may have idled past T since their pools were last looked at.
      this.pools.forEach((p, k) => {
        if (k !== j) this.record(k, p.collect(now));
      });
      let freed = this.inUse() < sim.config.capacity;
      for (let k = 0; k < this.pools.length && !freed; k++) {
        const o = (this.pools[k] as ClairvoyantPool).evictIdle(now);
        if (o !== undefined) {
          this.record(k, [o]);
          freed = true;
        }
      }
      if (!freed) return false;
    }
    const got = pool.acquire(now, sim.requests.service[req] as number);
    if (got.coldStart) sim.metrics.coldStart(j);
    sim.requests.target[req] = got.index;
    sim.schedule(now + (sim.requests.service[req] as number), DONE, req);
    return true;
  }

  handle(kind: number, a: number): void {
    const sim = this.sim;
    if (kind === START) {
      if (this.waitHead < this.waiting.length || !this.tryStart(a)) this.waiting.push(a);
      return;
    }
    if (kind !== DONE) throw new Error(`clairvoyant cluster: unknown event kind ${kind}`);
    const r = sim.requests;
    const j = r.job[a] as number;
    const o = (this.pools[j] as ClairvoyantPool).release(r.target[a] as number, sim.now);
    if (o !== undefined) this.record(j, [o]);
    sim.complete(a, sim.now - (r.arrival[a] as number) + this.fixedMs);
    while (this.waitHead < this.waiting.length) {
      const next = this.waiting[this.waitHead] as number;
      if (sim.now - (r.arrival[next] as number) > sim.config.dropAfterMs) {
        this.waitHead++;
        sim.drop(next);
        continue;
      }
      if (!this.tryStart(next)) break;
      this.waitHead++;
    }
    if (this.waitHead > 4096 && this.waitHead * 2 > this.waiting.length) {
      this.waiting.splice(0, this.waitHead);
      this.waitHead = 0;
    }
  }

  finish(endMs: number): void {
    this.pools.forEach((p, j) => {
      this.record(j, p.finish(endMs));
    });
  }
}
