import { xoroshiro128plus } from "pure-rand/generator/xoroshiro128plus";

/** A source of uniform numbers in [0, 1). Injected everywhere randomness is used. */
export interface Random {
  uniform(): number;
}

export const systemRandom: Random = { uniform: () => Math.random() };

/** Deterministic for a given seed (xoroshiro128+ from pure-rand). */
export function seededRandom(seed: number): Random {
  const rng = xoroshiro128plus(seed | 0);
  return {
    uniform: () => {
      // Two 32-bit draws give 53 bits, as Math.random does.
      const hi = (rng.next() >>> 0) >>> 5;
      const lo = (rng.next() >>> 0) >>> 6;
      return (hi * 67108864 + lo) / 9007199254740992;
    },
  };
}

/** Uniform integer in [0, n). */
export function randomInt(random: Random, n: number): number {
  return Math.min(n - 1, Math.floor(random.uniform() * n));
}
