import { isIP } from "node:net";

/**
 * Per-client token buckets at the broker: a client may send `ratePerSec` requests a second with bursts of
 * `burst`; beyond that it is refused before any work is done, told when a token will be there. Time comes in as
 * an argument. A client is its authenticated name at a broker with client auth, else its peer address.
 */
export interface ClientRateLimitOptions {
  ratePerSec: number;
  burst: number;
  /** Clients remembered at most (least recently seen forgotten): many addresses cannot grow the map unbounded. */
  maxClients?: number;
}

export type RateDecision = { ok: true } | { ok: false; retryAfterMs: number };

export class ClientRateLimiter {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  private readonly maxClients: number;

  constructor(private readonly options: ClientRateLimitOptions) {
    if (!(options.ratePerSec > 0 && options.burst >= 1)) throw new RangeError("rate must be positive and burst at least 1");
    this.maxClients = options.maxClients ?? 10_000;
  }

  take(client: string, now: number): RateDecision {
    const { ratePerSec, burst } = this.options;
    let b = this.buckets.get(client);
    if (b) this.buckets.delete(client);
    else {
      if (this.buckets.size >= this.maxClients) {
        const oldest = this.buckets.keys().next().value;
        if (oldest !== undefined) this.buckets.delete(oldest);
      }
      b = { tokens: burst, at: now };
    }
    // Re-inserted: the map's order is least recently seen first.
    this.buckets.set(client, b);
    b.tokens = Math.min(burst, b.tokens + (Math.max(0, now - b.at) * ratePerSec) / 1000);
    b.at = now;
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return { ok: true };
    }
    return { ok: false, retryAfterMs: Math.ceil(((1 - b.tokens) * 1000) / ratePerSec) };
  }
}

/**
 * The client a gRPC peer string names, its address without the port: "ipv4:127.0.0.1:5321", "ipv6:[::1]:5321", or
 * as grpc-js's server and the direct path give it, address and port joined by a colon however many the address
 * has ("::1:5321", "::ffff:10.0.0.1:40000"). A trailing ":<digits>" is a port when what precedes it is an IP
 * address; keeping it made every IPv6 connection a client of its own (and a fresh rate limit per reconnect).
 */
export function peerAddress(peer: string): string {
  const bare = peer.replace(/^(ipv4|ipv6|unix):/, "");
  const bracket = /^\[([^\]]+)\]/.exec(bare);
  if (bracket?.[1]) return bracket[1];
  const port = /:(\d{1,5})$/.exec(bare);
  if (port && isIP(bare.slice(0, port.index)) !== 0) return bare.slice(0, port.index);
  return bare;
}
