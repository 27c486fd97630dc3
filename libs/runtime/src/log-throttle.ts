/**
 * Rate limit for log lines a peer can cause (garbled messages, bad requests): per key, the first `perWindow`
 * lines of each window are written, the rest counted and reported with the key's next written line. Garbage at
 * line rate would otherwise fill the disk and bury the lines that matter (40,000 lines a second were seen).
 * Time comes in as an argument.
 */
export class LogThrottle {
  private readonly keys = new Map<string, { windowStart: number; written: number; suppressed: number }>();

  constructor(
    private readonly windowMs = 10_000,
    private readonly perWindow = 5,
    /** Keys remembered at most; a peer inventing keys (subjects) cannot grow the map without bound. */
    private readonly maxKeys = 1_000,
  ) {}

  /** Whether to write this line, and how many of the key's lines were held back since the last one written. */
  admit(key: string, now: number): { write: boolean; suppressed: number } {
    let k = this.keys.get(key);
    if (!k) {
      if (this.keys.size >= this.maxKeys) {
        const oldest = this.keys.keys().next().value;
        if (oldest !== undefined) this.keys.delete(oldest);
      }
      k = { windowStart: now, written: 0, suppressed: 0 };
      this.keys.set(key, k);
    }
    if (now - k.windowStart >= this.windowMs) {
      k.windowStart = now;
      k.written = 0;
    }
    if (k.written >= this.perWindow) {
      k.suppressed += 1;
      return { write: false, suppressed: 0 };
    }
    k.written += 1;
    const suppressed = k.suppressed;
    k.suppressed = 0;
    return { write: true, suppressed };
  }
}
