import { xoroshiro128plus } from "pure-rand/generator/xoroshiro128plus";

/** A source of uniform numbers in [0, 1). Injected everywhere randomness is used. */
export interface Random {
  uniform(): number;
}

export const systemRandom: Random = { uniform: () => Math.random() };

/** splitmix32's finaliser: spreads nearby seeds (0, 1, 2...) over the whole 32-bit space. */
function mixSeed(seed: number): number {
  let z = (seed + 0x9e3779b9) | 0;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  return (z ^ (z >>> 16)) | 0;
}

/**
 * Deterministic for a given seed (xoroshiro128+ from pure-rand). xoroshiro's first outputs from a
 * low-entropy state are nearly constant (seeds 0..42 all gave 0.99999 first), so the seed is
 * mixed and the first outputs are discarded.
 */
export function seededRandom(seed: number): Random {
  const rng = xoroshiro128plus(mixSeed(seed | 0));
  for (let i = 0; i < 16; i++) rng.next();
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
