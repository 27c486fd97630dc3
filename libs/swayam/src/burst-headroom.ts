/**
 * How much a service's rate has risen within one set-up time (t_setup, a cold start), learned online from the
 * service's own arrivals as one frontend sees them: the warm headroom its bursts need. A burst that rises
 * faster than a backend can be set up is served only by backends already warm; Swayam's burst factor U
 * scales the predicted rate, which for a service idle between bursts is about nothing. This remembers, over
 * `memoryMs`, the largest rise of the short-term rate within t_setup that Poisson noise does not explain
 * (more than `noiseSigmas` standard deviations of the earlier rate's count), so a service that has burst keeps
 * that much rate warm, and one whose rate only drifts keeps none.
 */

export interface BurstHeadroomSettings {
  /** The rise is measured over this (t_setup: a backend set up at the burst's start serves only after it). */
  readonly riseMs: number;
  /** The span the short-term rate is measured over (a rate bucket). */
  readonly spanMs: number;
  /** How long a rise is remembered. */
  readonly memoryMs: number;
  /** Rises within this many standard deviations of a Poisson count at the earlier rate are noise. */
  readonly noiseSigmas: number;
  /**
   * Rises seen within this long of the first observation are not learned (default 0): a service's onset is a
   * rise from no history, not a burst, and the load's first seconds at a real frontend arrive in clumps.
   */
  readonly settleMs?: number;
}

/** Ten-second t_setup (Swayam's): what FrontendScaler's learnedHeadroomFor(10_000) gives. */
export const BURST_HEADROOM_DEFAULTS: BurstHeadroomSettings = {
  riseMs: 20_000,
  spanMs: 10_000,
  memoryMs: 21_600_000,
  noiseSigmas: 3,
};

/** Rises seen (time, rise in requests/s) and the short-term rates they are measured from. */
export class BurstHeadroom {
  /** The span the rate given to observe() should be measured over. */
  readonly spanMs: number;
  private readonly rateAt: number[] = [];
  private readonly rate: number[] = [];
  private readonly riseAt: number[] = [];
  private readonly rise: number[] = [];
  /** The most frontends the service had over the memory, a sliding maximum (times increasing, counts decreasing). */
  private readonly fAt: number[] = [];
  private readonly f: number[] = [];
  private firstAt: number | undefined;

  constructor(private readonly settings: BurstHeadroomSettings = BURST_HEADROOM_DEFAULTS) {
    this.spanMs = settings.spanMs;
    if (!(settings.riseMs > 0) || !(settings.spanMs > 0) || !(settings.memoryMs >= settings.riseMs) || !(settings.noiseSigmas >= 0))
      throw new RangeError("burst headroom: riseMs > 0, spanMs > 0, memoryMs >= riseMs and noiseSigmas >= 0 are required");
  }

  /**
   * One observation: the short-term rate (requests/s over about spanMs) at `now`. Its rise is measured against
   * the lowest rate observed over [now - riseMs, now).
   */
  observe(now: number, ratePerSec: number, frontends = 1): void {
    const s = this.settings;
    while (this.f.length > 0 && (this.f[this.f.length - 1] as number) <= frontends) {
      this.f.pop();
      this.fAt.pop();
    }
    this.f.push(frontends);
    this.fAt.push(now);
    while (this.fAt.length > 0 && (this.fAt[0] as number) < now - s.memoryMs) {
      this.fAt.shift();
      this.f.shift();
    }
    while (this.rateAt.length > 0 && (this.rateAt[0] as number) < now - s.riseMs) {
      this.rateAt.shift();
      this.rate.shift();
    }
    this.firstAt ??= now;
    let low = Number.POSITIVE_INFINITY;
    for (const r of this.rate) low = Math.min(low, r);
    if (Number.isFinite(low) && now - this.firstAt >= (s.settleMs ?? 0)) {
      const spanS = s.spanMs / 1000;
      const noise = (s.noiseSigmas * Math.sqrt(Math.max(1, low * spanS))) / spanS;
      // The noise only decides whether a rise is a burst; a burst is learned whole. Learning only its excess over
      // the noise left a service that idles between bursts short by the noise times its frontends (Azure days 8-9,
      // fn08: 43 % of its windows compliant, 73 % learned whole; docs/results.md).
      const rise = ratePerSec - low > noise ? ratePerSec - low : 0;
      if (rise > 0) {
        while (this.rise.length > 0 && (this.rise[this.rise.length - 1] as number) <= rise) {
          this.rise.pop();
          this.riseAt.pop();
        }
        this.rise.push(rise);
        this.riseAt.push(now);
      }
    }
    this.rateAt.push(now);
    this.rate.push(Math.max(0, ratePerSec));
    while (this.riseAt.length > 0 && (this.riseAt[0] as number) < now - s.memoryMs) {
      this.riseAt.shift();
      this.rise.shift();
    }
  }

  /**
   * The largest rise remembered at `now` (requests/s; 0 when none), times the most frontends seen over the
   * memory: a frontend sees its share of a burst, and a service idle between bursts is seen by fewer frontends
   * than it has while it bursts.
   */
  headroom(now: number): number {
    let i = 0;
    while (i < this.riseAt.length && (this.riseAt[i] as number) < now - this.settings.memoryMs) i++;
    return i < this.rise.length ? (this.rise[i] as number) * (this.f[0] ?? 1) : 0;
  }
}
