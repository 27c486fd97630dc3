import { describe, expect, it } from "vitest";
import { BackendMachine } from "./backend-machine.js";

function warm(b: BackendMachine, now = 0, service = "svc"): void {
  b.warmUp(now, service);
  b.loadFinished(now);
}

describe("BackendMachine", () => {
  it("warm-up is idempotent: only a cold backend starts loading", () => {
    const b = new BackendMachine();
    expect(b.state).toBe("cold");
    expect(b.warmUp(0, "svc")).toEqual({ startLoad: true, outcome: "started" });
    expect(b.state).toBe("provisioning");
    expect(b.warmUp(1, "svc")).toEqual({ startLoad: false, outcome: "already-provisioning" });
    expect(b.loadFinished(5_000)).toBe(true);
    expect(b.loadFinished(5_001)).toBe(false);
    expect(b.state).toBe("warm-idle");
    expect(b.warmUp(6_000, "svc")).toEqual({ startLoad: false, outcome: "already-warm" });
    expect(b.warmUp(6_000, "other")).toEqual({ startLoad: false, outcome: "other-service" });
    expect(b.service).toBe("svc");
  });

  it("refuses with the reason of its state", () => {
    const b = new BackendMachine();
    expect(b.tryAcquire(0, "f1")).toEqual({ accepted: false, reason: "cold" });
    b.warmUp(0, "svc");
    expect(b.tryAcquire(1, "f1")).toEqual({ accepted: false, reason: "provisioning" });
    b.loadFinished(2);
    expect(b.tryAcquire(3, "f1")).toEqual({ accepted: true });
    expect(b.state).toBe("busy");
    expect(b.tryAcquire(4, "f2")).toEqual({ accepted: false, reason: "busy" });
    expect(b.tryAcquire(4, "f2", "other")).toEqual({ accepted: false, reason: "cold" });
    b.release(5);
    expect(b.state).toBe("warm-idle");
    expect(b.drain(6)).toBe(true);
    expect(b.tryAcquire(7, "f1")).toEqual({ accepted: false, reason: "cold" });
  });

  it("a failed load goes back to cold and the next warm-up retries", () => {
    const b = new BackendMachine();
    b.warmUp(0, "svc");
    expect(b.loadFailed(100)).toBe(true);
    expect(b.state).toBe("cold");
    expect(b.warmUp(200, "svc").startLoad).toBe(true);
  });

  it("honours concurrency", () => {
    const b = new BackendMachine({ concurrency: 2 });
    warm(b);
    expect(b.tryAcquire(1, "f1").accepted).toBe(true);
    expect(b.tryAcquire(1, "f1").accepted).toBe(true);
    expect(b.tryAcquire(1, "f1")).toEqual({ accepted: false, reason: "busy" });
    b.release(2);
    expect(b.state).toBe("busy");
    expect(b.idleDeadline()).toBeUndefined();
    b.release(3);
    expect(b.idleDeadline()).toBe(3 + 300_000);
  });

  it("decommissions exactly once, atomically, after idling T", () => {
    const b = new BackendMachine({ idleTimeoutMs: 1_000 });
    warm(b, 0);
    b.tryAcquire(100, "f1");
    b.release(500);
    expect(b.idleDeadline()).toBe(1_500);
    expect(b.checkIdle(1_499)).toBe(false);
    expect(b.checkIdle(1_500)).toBe(true);
    expect(b.state).toBe("cold");
    expect(b.checkIdle(1_500)).toBe(false);
    expect(b.checkIdle(99_999)).toBe(false);
    // Nothing is accepted until the next warm-up, even at the same instant.
    expect(b.tryAcquire(1_500, "f1")).toEqual({ accepted: false, reason: "cold" });
    expect(b.idleDeadline()).toBeUndefined();
    expect(b.warmUp(1_600, "svc").startLoad).toBe(true);
  });

  it("requests and warm-ups restart the idle clock; a busy backend never decommissions", () => {
    const b = new BackendMachine({ idleTimeoutMs: 1_000 });
    warm(b, 0);
    b.tryAcquire(900, "f1");
    expect(b.checkIdle(5_000)).toBe(false); // still busy
    b.release(5_000);
    b.warmUp(5_800, "svc"); // a frontend just put this entry in its prefix
    expect(b.checkIdle(6_000)).toBe(false);
    expect(b.idleDeadline()).toBe(6_800);
    expect(b.checkIdle(6_800)).toBe(true);
  });

  it("counts distinct frontends that sent requests (refused ones too, warm-ups not) within t_setup", () => {
    const b = new BackendMachine();
    b.warmUp(0, "svc"); // warm-ups do not count
    b.tryAcquire(0, "f1"); // refused (provisioning) but counted
    b.loadFinished(1_000);
    b.tryAcquire(2_000, "f2");
    b.tryAcquire(3_000, "f3"); // refused (busy), counted
    b.tryAcquire(4_000, "f2");
    expect(b.frontendsSeen(4_000)).toBe(3);
    expect(b.frontendsSeen(10_000)).toBe(3); // f1 exactly 10 s ago: still in
    expect(b.frontendsSeen(10_001)).toBe(2);
    expect(b.frontendsSeen(14_001)).toBe(0);
  });

  it("draining refuses new work, lets in-flight requests finish, then goes cold", () => {
    const b = new BackendMachine();
    warm(b);
    b.tryAcquire(1, "f1");
    expect(b.drain(2)).toBe(false);
    expect(b.state).toBe("draining");
    expect(b.tryAcquire(3, "f2")).toEqual({ accepted: false, reason: "draining" });
    expect(b.warmUp(3, "svc")).toEqual({ startLoad: false, outcome: "draining" });
    expect(b.release(4)).toBe(true);
    expect(b.state).toBe("cold");
    // A drain while provisioning abandons the load; its completion is ignored.
    b.warmUp(5, "svc");
    expect(b.drain(6)).toBe(true);
    expect(b.loadFinished(7)).toBe(false);
    expect(b.state).toBe("cold");
  });
});

describe("checkIdle at exactly the deadline", () => {
  it("fires when called at idleDeadline(), whatever the rounding", async () => {
    const { BackendMachine: State } = await import("./backend-machine.js");
    for (const start of [0.1, 0.7, 1234.56789, 1e9 + 0.3]) {
      const b = new State({ idleTimeoutMs: 300_000.1 });
      b.warmUp(start, "s");
      b.loadFinished(start + 0.2);
      const deadline = b.idleDeadline() ?? Number.NaN;
      expect(b.checkIdle(deadline)).toBe(true);
      expect(b.state).toBe("cold");
    }
  });

  it("counts frontends the same when asked often (cached) as a fresh scan would", () => {
    const b = new BackendMachine({ frontendWindowMs: 100 });
    warm(b);
    b.tryAcquire(0, "f1");
    b.release(1);
    expect(b.frontendsSeen(50)).toBe(1);
    b.tryAcquire(60, "f2");
    expect(b.frontendsSeen(60)).toBe(2);
    b.tryAcquire(90, "f1");
    expect(b.frontendsSeen(100)).toBe(2);
    // f1's first sighting (t = 0) has been replaced by t = 90: it still counts at 160, f2 (t = 60) too.
    expect(b.frontendsSeen(160)).toBe(2);
    expect(b.frontendsSeen(161)).toBe(1);
    expect(b.frontendsSeen(191)).toBe(0);
    b.tryAcquire(200, "f3");
    expect(b.frontendsSeen(200)).toBe(1);
    // A clock that steps back must not leave a stale answer behind.
    b.tryAcquire(150, "f3");
    expect(b.frontendsSeen(250)).toBe(1);
    expect(b.frontendsSeen(251)).toBe(0);
  });
});

describe("BackendMachine.resize", () => {
  it("applies to new requests; a smaller size drops no accepted request", () => {
    const b = new BackendMachine({ concurrency: 3 });
    warm(b);
    for (let i = 0; i < 3; i++) expect(b.tryAcquire(1, "f").accepted).toBe(true);
    b.resize(1);
    expect(b.concurrency).toBe(1);
    expect(b.requestsInFlight).toBe(3);
    expect(b.tryAcquire(2, "f")).toEqual({ accepted: false, reason: "busy" });
    b.release(3);
    b.release(3);
    expect(b.hasFreeSlot()).toBe(false);
    b.release(4);
    expect(b.state).toBe("warm-idle");
    expect(b.tryAcquire(5, "f").accepted).toBe(true);
    b.resize(2);
    expect(b.tryAcquire(5, "f").accepted).toBe(true);
    expect(b.tryAcquire(5, "f").accepted).toBe(false);
  });
});
