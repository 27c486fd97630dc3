import { type Random, seededRandom } from "@infergrid/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  DISPATCH_DEFAULTS,
  type DispatchAction,
  type DispatchEvent,
  type DispatchPhase,
  type DispatchRefusal,
  type DispatchSettings,
  type DispatchState,
  type DispatchView,
  isParkedIn,
  newDispatch,
  type ParkEnding,
  stepDispatch,
} from "./dispatch-machine.js";

type Action = DispatchAction<string, string>;
type Event = DispatchEvent<string>;

const LIST = ["a", "b", "c", "d", "e", "f"];
const SETTINGS: DispatchSettings = { ...DISPATCH_DEFAULTS, retryGapMs: 5, parkWindowMs: 100, parkFanout: 2, parkAnswerGraceMs: 200 };

interface Harness {
  st: DispatchState<string>;
  now: number;
  n: number;
  usable: Set<string>;
  rtMaxMs: number;
  pruneServiceMs: number | undefined;
  settings: DispatchSettings;
  seed: number;
}

function harness(o: Partial<Harness> & { giveUpAt?: number } = {}): Harness {
  const { giveUpAt = 10_000, ...rest } = o;
  return {
    st: newDispatch<string>(0, giveUpAt),
    now: 0,
    n: 3,
    usable: new Set(LIST),
    rtMaxMs: 1000,
    pruneServiceMs: undefined,
    settings: SETTINGS,
    seed: 1,
    ...rest,
  };
}

const random = seededRandom(7);

function viewOf(h: Harness, rnd: Random = random): DispatchView<string> {
  return {
    now: h.now,
    n: h.n,
    listLength: LIST.length,
    key: (i) => LIST[i] as string,
    usable: (i) => h.usable.has(LIST[i] as string),
    rtMaxMs: h.rtMaxMs,
    pruneServiceMs: h.pruneServiceMs,
    random: rnd,
  };
}

function feed(h: Harness, ev: Event): Action[] {
  const out: Action[] = [];
  stepDispatch(h.st, ev, viewOf(h), h.settings, out);
  return out;
}

function only<K extends Action["kind"]>(actions: Action[], kind: K): Extract<Action, { kind: K }> {
  const found = actions.filter((a) => a.kind === kind);
  expect(found, `one ${kind} in ${JSON.stringify(actions)}`).toHaveLength(1);
  return found[0] as Extract<Action, { kind: K }>;
}

/** Refuses every entry of the prefix once (busy), returning the actions of the last refusal. */
function refuseRound(h: Harness, reason: DispatchRefusal = "busy"): Action[] {
  let actions = feed(h, { kind: "arrived" });
  for (;;) {
    const send = actions.find((a) => a.kind === "send");
    if (!send) return actions;
    h.now += send.delayMs + 1;
    actions = feed(h, { kind: "refused", reason });
  }
}

describe("dispatch machine: worked cases", () => {
  it("sends a new request to a random entry of the prefix at once", () => {
    const h = harness();
    const send = only(feed(h, { kind: "arrived" }), "send");
    expect(["a", "b", "c"]).toContain(send.entry);
    expect(send.delayMs).toBe(0);
    expect(send.attempt).toBe(1);
    expect(h.st.phase).toBe("sending");
  });

  it("answers once when the backend answers", () => {
    const h = harness();
    feed(h, { kind: "arrived" });
    expect(feed(h, { kind: "answered" })).toEqual([{ kind: "answer" }]);
    expect(h.st.phase).toBe("done");
    expect(feed(h, { kind: "answered" })).toEqual([]);
  });

  it("probing: a refused round ends with the round backoff, then probes the prefix again", () => {
    const h = harness({ settings: { ...SETTINGS, parkWindowMs: 0 } });
    const first = only(feed(h, { kind: "arrived" }), "send");
    const seen = new Set([first.entry]);
    // Within a round each retry goes to an untried entry, delta later.
    for (let i = 0; i < 2; i++) {
      h.now += 1;
      const retry = only(feed(h, { kind: "refused", reason: "busy" }), "send");
      expect(retry.delayMs).toBe(SETTINGS.retryGapMs);
      expect(seen.has(retry.entry)).toBe(false);
      seen.add(retry.entry);
    }
    expect(seen).toEqual(new Set(["a", "b", "c"]));
    // The round is over: delta plus the backoff of a young request (delta x 2^1), entries tried afresh.
    h.now += 1;
    const next = only(feed(h, { kind: "refused", reason: "busy" }), "send");
    expect(next.delayMs).toBe(SETTINGS.retryGapMs + Math.min(100, SETTINGS.retryGapMs * 2));
    expect(h.st.rounds).toBe(1);
    expect(["a", "b", "c"]).toContain(next.entry);
  });

  it("an old request (past a quarter of RT_max) does not back off after a round", () => {
    const h = harness({ settings: { ...SETTINGS, parkWindowMs: 0 } });
    feed(h, { kind: "arrived" });
    h.now = 300;
    feed(h, { kind: "refused", reason: "busy" });
    feed(h, { kind: "refused", reason: "busy" });
    const next = only(feed(h, { kind: "refused", reason: "busy" }), "send");
    expect(next.delayMs).toBe(SETTINGS.retryGapMs);
  });

  it("a cold refusal warms that entry and retries elsewhere after delta", () => {
    const h = harness();
    const first = only(feed(h, { kind: "arrived" }), "send");
    const actions = feed(h, { kind: "refused", reason: "cold" });
    expect(only(actions, "warm")).toEqual({ kind: "warm", index: first.index, entry: first.entry });
    const retry = only(actions, "send");
    expect(retry.entry).not.toBe(first.entry);
    expect(retry.delayMs).toBe(SETTINGS.retryGapMs);
  });

  it("busy: probes an untried entry at once, parks at two entries only once every entry refused", () => {
    const h = harness();
    feed(h, { kind: "arrived" });
    const second = feed(h, { kind: "refused", reason: "busy" });
    expect(only(second, "send").delayMs).toBe(0);
    feed(h, { kind: "refused", reason: "provisioning" });
    h.now = 20;
    const parked = feed(h, { kind: "refused", reason: "busy" });
    const park = only(parked, "park");
    expect(park.entries).toHaveLength(2);
    expect(new Set(park.entries).size).toBe(2);
    for (const e of park.entries) expect(["a", "b", "c"]).toContain(e);
    expect(park.waitMs).toBe(SETTINGS.parkWindowMs);
    expect(park.ageMs).toBe(20);
    expect(only(parked, "timer").at).toBe(20 + SETTINGS.parkWindowMs + SETTINGS.parkAnswerGraceMs);
    expect(isParkedIn(h.st, park.round)).toBe(true);
  });

  it("parking: the first hold wins, the other park is withdrawn, the request runs in the held slot", () => {
    const h = harness();
    const park = only(refuseRound(h), "park");
    h.now += 30;
    const won = feed(h, { kind: "held", round: park.round, target: 1, hold: "h1" });
    expect(only(won, "withdraw")).toEqual({ kind: "withdraw", round: park.round, entries: [park.entries[0]] });
    const send = only(won, "send");
    expect(send).toMatchObject({ entry: park.entries[1], index: park.indices[1], hold: "h1", delayMs: 0, attempt: 4 });
    expect(isParkedIn(h.st, park.round)).toBe(false);
    // The withdrawn park's backend held a slot before the withdraw reached it: that slot goes back.
    expect(feed(h, { kind: "held", round: park.round, target: 0, hold: "h0" })).toEqual([{ kind: "release", hold: "h0" }]);
    expect(feed(h, { kind: "answered" })).toEqual([{ kind: "answer" }]);
  });

  it("a caller that goes away: its parks are withdrawn, it fails cancelled once, and a hold offered after is released", () => {
    const h = harness();
    const park = only(refuseRound(h), "park");
    h.now += 10;
    const gone = feed(h, { kind: "cancelled" });
    expect(gone).toEqual([
      { kind: "withdraw", round: park.round, entries: park.entries },
      { kind: "fail", status: "cancelled", message: "cancelled by the caller after 3 attempts" },
    ]);
    expect(h.st.phase).toBe("done");
    expect(feed(h, { kind: "held", round: park.round, target: 0, hold: "late" })).toEqual([{ kind: "release", hold: "late" }]);
    expect(feed(h, { kind: "cancelled" })).toEqual([]);
    expect(feed(h, { kind: "timer", round: park.round })).toEqual([]);
  });

  it("a hold offered after the request was answered is released", () => {
    const h = harness();
    const park = only(refuseRound(h), "park");
    feed(h, { kind: "held", round: park.round, target: 0, hold: "h0" });
    feed(h, { kind: "answered" });
    expect(feed(h, { kind: "held", round: park.round, target: 1, hold: "late" })).toEqual([{ kind: "release", hold: "late" }]);
  });

  it("a round whose parks all time out probes again at once, with every entry untried", () => {
    const h = harness();
    const park = only(refuseRound(h), "park");
    h.now += park.waitMs;
    expect(feed(h, { kind: "park-ended", round: park.round, target: 0, how: "timed-out" })).toEqual([]);
    const send = only(feed(h, { kind: "park-ended", round: park.round, target: 1, how: "timed-out" }), "send");
    expect(send.delayMs).toBe(0);
    expect(h.st.tried.size).toBe(1);
  });

  it("a round whose parks are all refused early retries after delta, warming the cold entry", () => {
    const h = harness();
    const park = only(refuseRound(h), "park");
    h.now += 1;
    const cold = feed(h, { kind: "park-ended", round: park.round, target: 0, how: "cold" });
    expect(cold).toEqual([{ kind: "warm", index: park.indices[0], entry: park.entries[0] }]);
    const send = only(feed(h, { kind: "park-ended", round: park.round, target: 1, how: "draining" }), "send");
    expect(send.delayMs).toBe(SETTINGS.retryGapMs);
  });

  it("a park call that failed without the backend's answer is withdrawn there (a slot may be held for it)", () => {
    const h = harness();
    const park = only(refuseRound(h), "park");
    expect(feed(h, { kind: "park-ended", round: park.round, target: 1, how: "error" })).toEqual([
      { kind: "withdraw", round: park.round, entries: [park.entries[1]] },
    ]);
    // A stale failure (the round is over) changes nothing.
    feed(h, { kind: "held", round: park.round, target: 0, hold: "h0" });
    expect(feed(h, { kind: "park-ended", round: park.round, target: 1, how: "error" })).toEqual([]);
  });

  it("the round's timer withdraws parks that never answered (a hung backend) and probes again", () => {
    const h = harness();
    const park = only(refuseRound(h), "park");
    feed(h, { kind: "park-ended", round: park.round, target: 0, how: "timed-out" });
    h.now += park.waitMs + SETTINGS.parkAnswerGraceMs;
    const actions = feed(h, { kind: "timer", round: park.round });
    expect(only(actions, "withdraw").entries).toEqual([park.entries[1]]);
    expect(only(actions, "send").delayMs).toBe(0);
    // The old round's timer, or a stale answer, changes nothing.
    expect(feed(h, { kind: "timer", round: park.round })).toEqual([]);
    expect(feed(h, { kind: "park-ended", round: park.round, target: 1, how: "withdrawn" })).toEqual([]);
  });

  it("a park round is cut to the deadline; at the deadline the request fails unavailable, withdrawing its parks", () => {
    const h = harness({ giveUpAt: 80 });
    const park = only(refuseRound(h), "park");
    expect(park.waitMs).toBe(80 - h.now - SETTINGS.retryGapMs);
    h.now = 80;
    const actions = feed(h, { kind: "timer", round: park.round });
    expect(only(actions, "withdraw").entries).toEqual(park.entries);
    expect(only(actions, "fail")).toMatchObject({ status: "unavailable" });
    expect(h.st.phase).toBe("done");
  });

  it("a request whose deadline passed before any attempt fails deadline-exceeded", () => {
    const h = harness({ giveUpAt: 3 });
    expect(only(feed(h, { kind: "arrived" }), "fail")).toMatchObject({ status: "deadline-exceeded" });
  });

  it("a backend failing mid-request is suspected and the request retries another entry at once", () => {
    const h = harness();
    const first = only(feed(h, { kind: "arrived" }), "send");
    h.now = 50;
    const actions = feed(h, { kind: "failed" });
    expect(only(actions, "suspect")).toEqual({ kind: "suspect", entry: first.entry });
    const retry = only(actions, "send");
    expect(retry.entry).not.toBe(first.entry);
    expect(retry.delayMs).toBe(0);
  });

  it("a request that timed out on two backends ends deadline-exceeded; unreachable backends do not count", () => {
    const h = harness();
    const first = only(feed(h, { kind: "arrived" }), "send");
    h.now = 10;
    // Unreachable twice: retried each time.
    const second = only(feed(h, { kind: "failed" }), "send");
    h.now = 20;
    const third = only(feed(h, { kind: "failed" }), "send");
    expect(new Set([first.entry, second.entry, third.entry]).size).toBe(3);
    // Timed out once (a hung backend): retried elsewhere.
    h.now = 1_020;
    const timedOut = feed(h, { kind: "failed", timedOut: true });
    expect(only(timedOut, "suspect").entry).toBe(third.entry);
    const fourth = only(timedOut, "send");
    // Timed out again: the request is slow itself, and goes to no third backend.
    h.now = 2_020;
    const ended = feed(h, { kind: "failed", timedOut: true });
    expect(only(ended, "suspect").entry).toBe(fourth.entry);
    expect(ended.filter((a) => a.kind === "send")).toEqual([]);
    expect(only(ended, "fail")).toMatchObject({ status: "deadline-exceeded" });
    expect(only(ended, "fail").message).toMatch(/timed out on 2 backends/);
    expect(h.st.phase).toBe("done");
  });

  it("a request two backends refused unrun as too long ends deadline-exceeded with what they said, neither suspected", () => {
    const h = harness();
    only(feed(h, { kind: "arrived" }), "send");
    const said = "its 1000 rows take about 5000 ms on this backend (1 core), more than the 998 ms its caller gave it; not run";
    const again = feed(h, { kind: "failed", timedOut: true, notRun: said });
    expect(again.filter((a) => a.kind === "suspect")).toEqual([]);
    only(again, "send");
    const ended = feed(h, { kind: "failed", timedOut: true, notRun: said });
    expect(ended.filter((a) => a.kind === "suspect" || a.kind === "send")).toEqual([]);
    expect(only(ended, "fail")).toMatchObject({
      status: "deadline-exceeded",
      message: `not run: 2 backends could not finish it within its attempt allowance (the last: ${said})`,
    });
  });

  it("a failure past the give-up time ends the request", () => {
    const h = harness({ giveUpAt: 100 });
    feed(h, { kind: "arrived" });
    h.now = 100;
    expect(only(feed(h, { kind: "failed" }), "fail")).toMatchObject({ status: "unavailable" });
  });

  it("an Execute that runs into the request's own deadline ends it, without suspecting the backend", () => {
    const h = harness({ giveUpAt: 100 });
    feed(h, { kind: "arrived" });
    h.now = 100;
    const actions = feed(h, { kind: "expired" });
    expect(actions.map((a) => a.kind)).toEqual(["fail"]);
    expect(only(actions, "fail").status).toBe("deadline-exceeded");
  });

  it("a rejection (bad input) ends the request with the backend's code", () => {
    const h = harness();
    feed(h, { kind: "arrived" });
    expect(feed(h, { kind: "rejected", code: 3, message: "bad tensor" })).toEqual([
      { kind: "fail", status: "rejected", message: "bad tensor", code: 3 },
    ]);
  });

  it("with every entry suspected it still probes one of the prefix rather than give up", () => {
    const h = harness({ usable: new Set() });
    const send = only(feed(h, { kind: "arrived" }), "send");
    expect(send.index).toBeLessThan(3);
  });

  it("a service with no backends fails unavailable", () => {
    const h = harness();
    const out: Action[] = [];
    stepDispatch(
      h.st,
      { kind: "arrived" },
      { now: 0, n: 3, listLength: 0, key: () => "", usable: () => true, rtMaxMs: 1000, pruneServiceMs: undefined, random },
      SETTINGS,
      out,
    );
    expect(out).toEqual([{ kind: "fail", status: "unavailable", message: "the service has no backends" }]);
  });

  describe("pruning", () => {
    // RT_max 1000 ms, service 200 ms: a refused request can still make it while its age is at most 800 ms.
    it("retries while the request can still finish within RT_max, and is pruned exactly past that point", () => {
      const ok = harness({ pruneServiceMs: 200, settings: { ...SETTINGS, parkWindowMs: 0 } });
      feed(ok, { kind: "arrived" });
      ok.now = 800 - SETTINGS.retryGapMs;
      expect(only(feed(ok, { kind: "refused", reason: "busy" }), "send").delayMs).toBe(SETTINGS.retryGapMs);

      const late = harness({ pruneServiceMs: 200, settings: { ...SETTINGS, parkWindowMs: 0 } });
      feed(late, { kind: "arrived" });
      late.now = 800 - SETTINGS.retryGapMs + 0.001;
      const fail = only(feed(late, { kind: "refused", reason: "busy" }), "fail");
      expect(fail.status).toBe("pruned");
    });

    it("never prunes a first attempt, however old", () => {
      const h = harness({ pruneServiceMs: 200, now: 950 });
      h.st = newDispatch(0, 10_000);
      expect(only(feed(h, { kind: "arrived" }), "send").attempt).toBe(1);
    });

    it("a park round ends when the request can no longer make it, and the request is then pruned", () => {
      const h = harness({ pruneServiceMs: 200 });
      h.now = 700;
      const park = only(refuseRound(h), "park");
      expect(park.waitMs).toBeCloseTo(800 - h.now, 9);
      h.now = 800.5;
      const late = feed(h, { kind: "held", round: park.round, target: 0, hold: "h0" });
      expect(late).toContainEqual({ kind: "release", hold: "h0" });
      expect(only(late, "fail").status).toBe("pruned");
    });
  });
});

/** Every phase the machine can be in, reached by the events that lead there. */
function inPhase(phase: DispatchPhase): { h: Harness; round: number } {
  const h = harness();
  if (phase === "new") return { h, round: h.st.round };
  if (phase === "parked") return { h, round: only(refuseRound(h), "park").round };
  feed(h, { kind: "arrived" });
  if (phase === "done") feed(h, { kind: "answered" });
  return { h, round: h.st.round };
}

const EVENTS = (round: number): Event[] => [
  { kind: "arrived" },
  { kind: "answered" },
  { kind: "refused", reason: "busy" },
  { kind: "refused", reason: "cold" },
  { kind: "refused", reason: "provisioning" },
  { kind: "refused", reason: "draining" },
  { kind: "refused", reason: "not-assigned" },
  { kind: "failed" },
  { kind: "expired" },
  { kind: "rejected", code: 3, message: "bad" },
  { kind: "held", round, target: 0, hold: "h" },
  { kind: "held", round: round - 1, target: 0, hold: "stale" },
  { kind: "park-ended", round, target: 0, how: "timed-out" },
  { kind: "park-ended", round, target: 1, how: "unreachable" },
  { kind: "timer", round },
  { kind: "timer", round: round - 1 },
  { kind: "cancelled" },
];

describe("dispatch machine: every event in every phase", () => {
  const expected: Record<DispatchPhase, (ev: Event, actions: Action[], round: number) => void> = {
    new: (ev, actions) => {
      if (ev.kind === "arrived") expect(actions.map((a) => a.kind)).toEqual(["send"]);
      else if (ev.kind === "cancelled") expect(actions.map((a) => a.kind)).toEqual(["fail"]);
      else if (ev.kind === "held") expect(actions).toEqual([{ kind: "release", hold: ev.hold }]);
      else expect(actions).toEqual([]);
    },
    sending: (ev, actions) => {
      const kinds = actions.map((a) => a.kind);
      if (ev.kind === "answered") expect(kinds).toEqual(["answer"]);
      else if (ev.kind === "rejected" || ev.kind === "expired" || ev.kind === "cancelled") expect(kinds).toEqual(["fail"]);
      else if (ev.kind === "failed") expect(kinds).toEqual(["suspect", "send"]);
      else if (ev.kind === "refused") expect(kinds.at(-1)).toBe("send");
      else if (ev.kind === "held") expect(actions).toEqual([{ kind: "release", hold: ev.hold }]);
      else expect(actions).toEqual([]);
    },
    parked: (ev, actions, round) => {
      const kinds = actions.map((a) => a.kind);
      if (ev.kind === "held" && ev.hold === "h") expect(kinds).toEqual(["withdraw", "send"]);
      else if (ev.kind === "held") expect(actions).toEqual([{ kind: "release", hold: ev.hold }]);
      else if (ev.kind === "park-ended" && ev.how === "unreachable") expect(kinds).toEqual(["withdraw", "suspect"]);
      else if (ev.kind === "timer" && ev.round === round) expect(kinds).toEqual(["withdraw", "send"]);
      else if (ev.kind === "cancelled") expect(kinds).toEqual(["withdraw", "fail"]);
      else expect(actions).toEqual([]);
    },
    done: (ev, actions) => {
      if (ev.kind === "held") expect(actions).toEqual([{ kind: "release", hold: ev.hold }]);
      else expect(actions).toEqual([]);
    },
  };
  for (const phase of ["new", "sending", "parked", "done"] as const) {
    it(`phase ${phase}`, () => {
      for (const ev of EVENTS(inPhase(phase).round)) {
        const { h, round } = inPhase(phase);
        expected[phase](ev, feed(h, ev), round);
      }
    });
  }
});

/**
 * Drives one request through arbitrary interleavings: at every step fast-check picks which outstanding call or
 * timer completes next, how (answered, refused, failed, held, ended), and how much time passes. Backends may
 * answer withdrawn parks late, with a slot held or not.
 */
describe("dispatch machine: properties over every interleaving", () => {
  const REFUSALS: DispatchRefusal[] = ["busy", "cold", "provisioning", "draining", "not-assigned"];
  const ENDINGS: ParkEnding[] = ["timed-out", "cold", "draining", "not-assigned", "withdrawn", "unreachable", "error"];

  type Pending =
    | { kind: "send" }
    | { kind: "park"; round: number; target: number }
    | { kind: "timer"; round: number; at: number }
    | { kind: "delayed-send"; at: number };

  const step = fc.record({
    pick: fc.nat(),
    outcome: fc.nat(),
    advanceMs: fc.integer({ min: 0, max: 60 }),
  });

  it("answers or fails exactly once, never gets stuck, and every held slot is used once or released", () => {
    fc.assert(
      fc.property(
        fc.array(step, { minLength: 1, maxLength: 400 }),
        fc.integer({ min: 0, max: 120 }),
        fc.integer({ min: 1, max: 6 }),
        fc.boolean(),
        fc.integer({ min: 1, max: 1_000_000 }),
        (steps, parkWindowMs, n, prune, seed) => {
          const h = harness({
            n,
            giveUpAt: 1500,
            pruneServiceMs: prune ? 150 : undefined,
            settings: { ...SETTINGS, parkWindowMs },
          });
          const rnd = seededRandom(seed);
          const view = () => viewOf(h, rnd);
          const pending: Pending[] = [];
          const offered = new Set<string>();
          const usedOrReleased = new Set<string>();
          let terminal = 0;
          let holds = 0;
          const apply = (ev: Event) => {
            const out: Action[] = [];
            stepDispatch(h.st, ev, view(), h.settings, out);
            for (const a of out) {
              if (terminal > 0) expect(a.kind === "release" || a.kind === "withdraw", `${a.kind} after the end`).toBe(true);
              switch (a.kind) {
                case "send":
                  expect(pending.some((p) => p.kind === "send" || p.kind === "delayed-send")).toBe(false);
                  if (a.hold !== undefined) {
                    expect(offered.has(a.hold) && !usedOrReleased.has(a.hold)).toBe(true);
                    usedOrReleased.add(a.hold);
                  }
                  pending.push(a.delayMs > 0 ? { kind: "delayed-send", at: h.now + a.delayMs } : { kind: "send" });
                  break;
                case "park":
                  a.entries.forEach((_, target) => {
                    pending.push({ kind: "park", round: a.round, target });
                  });
                  break;
                case "timer":
                  expect(a.at).toBeGreaterThanOrEqual(h.now);
                  pending.push({ kind: "timer", round: a.round, at: a.at });
                  break;
                case "release":
                  expect(offered.has(a.hold) && !usedOrReleased.has(a.hold)).toBe(true);
                  usedOrReleased.add(a.hold);
                  break;
                case "answer":
                case "fail":
                  terminal += 1;
                  break;
                default:
                  break;
              }
            }
          };
          apply({ kind: "arrived" });
          for (const s of steps) {
            if (pending.length === 0) break;
            h.now += s.advanceMs;
            const i = s.pick % pending.length;
            const p = pending[i] as Pending;
            pending.splice(i, 1);
            if (p.kind === "delayed-send") {
              h.now = Math.max(h.now, p.at);
              pending.push({ kind: "send" });
            } else if (p.kind === "send") {
              const o = s.outcome % 9;
              if (o === 0) apply({ kind: "answered" });
              else if (o === 1) apply({ kind: "failed" });
              else if (o === 8) apply({ kind: "expired" });
              else if (o === 2) apply({ kind: "rejected", code: 3, message: "bad" });
              else apply({ kind: "refused", reason: REFUSALS[o % REFUSALS.length] as DispatchRefusal });
            } else if (p.kind === "park") {
              if (s.outcome % 3 === 0) {
                const hold = `h${holds++}`;
                offered.add(hold);
                apply({ kind: "held", round: p.round, target: p.target, hold });
              } else
                apply({ kind: "park-ended", round: p.round, target: p.target, how: ENDINGS[s.outcome % ENDINGS.length] as ParkEnding });
            } else {
              h.now = Math.max(h.now, p.at);
              apply({ kind: "timer", round: p.round });
            }
            // Never stuck: a request that has not ended always waits for something.
            if (terminal === 0) expect(pending.length).toBeGreaterThan(0);
          }
          expect(terminal).toBeLessThanOrEqual(1);
          if (pending.every((p) => p.kind === "park" || p.kind === "timer") && h.st.phase === "done") {
            expect(terminal).toBe(1);
          }
          // Holds are never leaked: each one offered is used or released (by now, or when its answer is fed).
          for (const hold of offered) expect(usedOrReleased.has(hold)).toBe(true);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("ends every request by its give-up time when backends keep refusing", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 120 }),
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 1, max: 1_000_000 }),
        (parkWindowMs, n, seed) => {
          const h = harness({ n, giveUpAt: 400, settings: { ...SETTINGS, parkWindowMs } });
          const rnd = seededRandom(seed);
          const out: Action[] = [];
          const view = () => viewOf(h, rnd);
          stepDispatch(h.st, { kind: "arrived" }, view(), h.settings, out);
          for (let i = 0; i < 10_000 && h.st.phase !== "done"; i++) {
            const a = out.find((x) => x.kind === "send" || x.kind === "park");
            const timer = out.find((x) => x.kind === "timer");
            out.length = 0;
            if (a?.kind === "send") {
              h.now += a.delayMs + 1;
              stepDispatch(h.st, { kind: "refused", reason: "busy" }, view(), h.settings, out);
            } else if (a?.kind === "park" && timer?.kind === "timer") {
              h.now = timer.at;
              stepDispatch(h.st, { kind: "timer", round: timer.round }, view(), h.settings, out);
            } else throw new Error("waiting for nothing");
          }
          expect(h.st.phase).toBe("done");
          expect(h.now).toBeLessThanOrEqual(400 + SETTINGS.parkAnswerGraceMs);
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe("with a priced view (Kairos's matching on a heterogeneous prefix)", () => {
  // Entry costs for this request: c is cheapest, then a, then b; d-f are outside the prefix (n = 3).
  const COST: Record<string, number> = { a: 20, b: 30, c: 10, d: 1, e: 1, f: 1 };
  function pricedFeed(h: Harness, ev: Event): Action[] {
    const out: Action[] = [];
    stepDispatch(h.st, ev, { ...viewOf(h), cost: (i) => COST[LIST[i] as string] as number }, h.settings, out);
    return out;
  }
  const sends = (acts: Action[]) => acts.flatMap((a) => (a.kind === "send" ? [a.entry] : []));

  it("tries the cheapest entry of the prefix, then the next cheapest untried one, never one past the prefix", () => {
    const h = harness();
    expect(sends(pricedFeed(h, { kind: "arrived" }))).toEqual(["c"]);
    expect(sends(pricedFeed(h, { kind: "refused", reason: "busy" }))).toEqual(["a"]);
    expect(sends(pricedFeed(h, { kind: "refused", reason: "busy" }))).toEqual(["b"]);
  });

  it("once all refused, parks at the parkFanout cheapest entries", () => {
    const h = harness();
    pricedFeed(h, { kind: "arrived" });
    pricedFeed(h, { kind: "refused", reason: "busy" });
    pricedFeed(h, { kind: "refused", reason: "busy" });
    const park = pricedFeed(h, { kind: "refused", reason: "busy" }).find((a) => a.kind === "park");
    expect(park?.kind === "park" ? park.entries : []).toEqual(["c", "a"]);
  });

  it("never sends to or parks at an entry that cannot meet QoS while one in the prefix can: it waits for that one", () => {
    const only = { a: 20, b: Number.POSITIVE_INFINITY, c: Number.POSITIVE_INFINITY } as Record<string, number>;
    const h = harness();
    const step = (ev: Event) => {
      const out: Action[] = [];
      stepDispatch(h.st, ev, { ...viewOf(h), cost: (i) => only[LIST[i] as string] ?? 1 }, h.settings, out);
      return out;
    };
    expect(sends(step({ kind: "arrived" }))).toEqual(["a"]);
    const next = step({ kind: "refused", reason: "busy" });
    expect(sends(next)).toEqual([]);
    const park = next.find((a) => a.kind === "park");
    expect(park?.kind === "park" ? park.entries : []).toEqual(["a"]);
  });

  it("with no entry of the prefix able to meet QoS, dispatches as without prices", () => {
    const h = harness();
    const out: Action[] = [];
    stepDispatch(h.st, { kind: "arrived" }, { ...viewOf(h), cost: () => Number.POSITIVE_INFINITY }, h.settings, out);
    expect(sends(out)).toHaveLength(1);
    expect(["a", "b", "c"]).toContain(sends(out)[0]);
  });

  it("skips an unusable entry however cheap", () => {
    const h = harness({ usable: new Set(["a", "b", "d", "e", "f"]) });
    // c is not usable: the prefix is a, b, d, and d is cheapest there.
    expect(sends(pricedFeed(h, { kind: "arrived" }))).toEqual(["d"]);
  });
});
