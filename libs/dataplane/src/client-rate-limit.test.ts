import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ClientRateLimiter, peerAddress } from "./client-rate-limit.js";

describe("ClientRateLimiter", () => {
  it("lets a burst through, then one request per 1/rate, and says when the next token comes", () => {
    const l = new ClientRateLimiter({ ratePerSec: 10, burst: 3 });
    expect([1, 2, 3].map(() => l.take("a", 0).ok)).toEqual([true, true, true]);
    expect(l.take("a", 0)).toEqual({ ok: false, retryAfterMs: 100 });
    expect(l.take("a", 40)).toEqual({ ok: false, retryAfterMs: 60 });
    expect(l.take("a", 100).ok).toBe(true);
    // Another client has its own bucket.
    expect(l.take("b", 100).ok).toBe(true);
  });

  it("never admits more than burst + rate x time, whatever the arrival pattern", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 200 }), { minLength: 1, maxLength: 300 }), (gaps) => {
        const l = new ClientRateLimiter({ ratePerSec: 20, burst: 5 });
        let now = 0;
        let admitted = 0;
        for (const g of gaps) {
          now += g;
          if (l.take("c", now).ok) admitted += 1;
        }
        expect(admitted).toBeLessThanOrEqual(5 + Math.floor((now * 20) / 1000));
      }),
    );
  });

  it("forgets the least recently seen client beyond maxClients", () => {
    const l = new ClientRateLimiter({ ratePerSec: 1, burst: 1, maxClients: 2 });
    expect(l.take("a", 0).ok).toBe(true);
    expect(l.take("b", 0).ok).toBe(true);
    expect(l.take("c", 0).ok).toBe(true); // "a" forgotten
    expect(l.take("a", 0).ok).toBe(true); // afresh; "b" forgotten now
    expect(l.take("c", 0).ok).toBe(false);
  });
});

describe("peerAddress", () => {
  it("drops the scheme and the port", () => {
    expect(peerAddress("ipv4:127.0.0.1:5321")).toBe("127.0.0.1");
    expect(peerAddress("ipv6:[::1]:5321")).toBe("::1");
    expect(peerAddress("127.0.0.1")).toBe("127.0.0.1");
    expect(peerAddress("::ffff:10.0.0.1")).toBe("::ffff:10.0.0.1");
    expect(peerAddress("unknown")).toBe("unknown");
  });

  it("drops the port of an IPv6 peer as grpc-js's server and the direct path write it (no brackets)", () => {
    expect(peerAddress("127.0.0.1:5321")).toBe("127.0.0.1");
    expect(peerAddress("::1:5321")).toBe("::1");
    expect(peerAddress("::ffff:10.0.0.1:40000")).toBe("::ffff:10.0.0.1");
    expect(peerAddress("2001:db8::7:443")).toBe("2001:db8::7");
    // Two connections of one client are one client.
    expect(peerAddress("::1:5321")).toBe(peerAddress("::1:40000"));
  });
});
