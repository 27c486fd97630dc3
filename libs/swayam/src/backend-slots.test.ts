import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { BackendMachine } from "./backend-machine.js";
import { BackendSlots } from "./backend-slots.js";

interface Call {
  id: string;
  frontend: string;
  live: boolean;
}

function warmBackend(concurrency = 1): { machine: BackendMachine; slots: BackendSlots<Call> } {
  const machine = new BackendMachine({ concurrency, idleTimeoutMs: 1_000 });
  machine.warmUp(0, "svc");
  machine.loadFinished(0);
  const slots = new BackendSlots<Call>(machine, { isLive: (c) => c.live, frontendOf: (c) => c.frontend });
  return { machine, slots };
}

const call = (id: string, frontend = "f1"): Call => ({ id, frontend, live: true });

describe("BackendSlots", () => {
  it("holds a free slot at once, parks while busy, refuses while cold", () => {
    const { machine, slots } = warmBackend();
    expect(slots.park(1, call("a"), 1)).toBe("held");
    expect(machine.state).toBe("busy");
    expect(slots.park(2, call("b"), 2)).toBe("parked");
    expect(slots.parked).toBe(1);
    const cold = new BackendSlots<Call>(new BackendMachine(), { isLive: () => true, frontendOf: (c) => c.frontend });
    expect(cold.park(0, call("c"), 0)).toBe("cold");
  });

  it("with service times, frees each slot for the request that must start first (arrival less its service time)", () => {
    const { machine, slots } = warmBackend();
    expect(slots.park(0, call("running"), 0)).toBe("held");
    // Arrived at 10 needing 2 ms (start by 8 + QoS), at 12 needing 30 ms (by -18 + QoS), at 11 with none given.
    slots.park(13, call("small"), 10, 2);
    slots.park(13, call("large"), 12, 30);
    slots.park(13, call("unknown"), 11);
    const order: string[] = [];
    for (let t = 20; order.length < 3; t++) {
      machine.release(t);
      order.push(...slots.serve(t).map((c) => c.id));
    }
    expect(order).toEqual(["large", "small", "unknown"]);
  });

  it("parks while the model loads and holds the slot for the oldest request once it is warm", () => {
    const machine = new BackendMachine();
    machine.warmUp(0, "svc");
    const slots = new BackendSlots<Call>(machine, { isLive: (c) => c.live, frontendOf: (c) => c.frontend });
    expect(slots.park(1, call("young"), 5)).toBe("parked");
    expect(slots.park(2, call("old"), 1)).toBe("parked");
    machine.loadFinished(3);
    expect(slots.serve(3).map((c) => c.id)).toEqual(["old"]);
    expect(machine.state).toBe("busy");
  });

  it("a slot that frees goes to the oldest live parked request, skipping withdrawn ones", () => {
    const { slots } = warmBackend();
    slots.park(0, call("running"), 0);
    const withdrawn = call("withdrawn");
    slots.park(1, withdrawn, 1);
    slots.park(2, call("next"), 2);
    slots.park(3, call("last"), 3);
    withdrawn.live = false;
    expect(slots.release(10)).toBe(false);
    expect(slots.serve(10).map((c) => c.id)).toEqual(["next"]);
    expect(slots.serve(10)).toEqual([]); // no free slot left
    slots.release(20);
    expect(slots.serve(20).map((c) => c.id)).toEqual(["last"]);
  });

  it("with concurrency 2 holds both free slots", () => {
    const { machine, slots } = warmBackend(2);
    slots.park(0, call("a"), 0);
    slots.park(0, call("b"), 0);
    expect(slots.park(1, call("c"), 1)).toBe("parked");
    expect(slots.park(2, call("d"), 2)).toBe("parked");
    slots.release(5);
    slots.release(5);
    expect(slots.serve(5).map((c) => c.id)).toEqual(["c", "d"]);
    expect(machine.requestsInFlight).toBe(2);
  });

  it("draining: the last release reports the backend cold and the lot is evicted, live requests only", () => {
    const { machine, slots } = warmBackend();
    slots.park(0, call("running"), 0);
    const dead = call("dead");
    slots.park(1, dead, 1);
    slots.park(2, call("waiting"), 2);
    dead.live = false;
    expect(machine.drain(3)).toBe(false);
    expect(slots.park(4, call("late"), 4)).toBe("draining");
    expect(slots.release(5)).toBe(true);
    expect(slots.evict().map((c) => c.id)).toEqual(["waiting"]);
    expect(slots.parked).toBe(0);
  });

  it("counts a parked request's frontend as seen (n_F) like any request", () => {
    const { machine, slots } = warmBackend();
    slots.park(0, call("a", "f1"), 0);
    slots.park(1, call("b", "f2"), 1);
    expect(machine.frontendsSeen(2)).toBe(2);
  });

  it("never holds more slots than it has, and serves parked requests oldest first", () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ op: fc.constantFrom("park", "release", "withdraw"), age: fc.nat(1000) }), { maxLength: 200 }),
        fc.integer({ min: 1, max: 4 }),
        (ops, concurrency) => {
          const { machine, slots } = warmBackend(concurrency);
          const parked: Call[] = [];
          let running = 0;
          let t = 0;
          const arrived = new Map<string, number>();
          for (const [i, o] of ops.entries()) {
            t += 1;
            if (o.op === "park") {
              const c = call(`c${i}`);
              arrived.set(c.id, t - o.age);
              const outcome = slots.park(t, c, t - o.age);
              if (outcome === "held") running += 1;
              else parked.push(c);
            } else if (o.op === "withdraw") {
              const c = parked.find((p) => p.live);
              if (c) c.live = false;
            } else if (running > 0) {
              slots.release(t);
              running -= 1;
              const held = slots.serve(t);
              running += held.length;
              for (const c of held) {
                expect(c.live).toBe(true);
                c.live = false; // taken: no longer waiting
                // Nothing still waiting arrived before it.
                for (const p of parked) if (p.live) expect(arrived.get(p.id) as number).toBeGreaterThanOrEqual(arrived.get(c.id) as number);
              }
            }
            expect(running).toBeLessThanOrEqual(concurrency);
            expect(machine.requestsInFlight).toBe(running);
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});
