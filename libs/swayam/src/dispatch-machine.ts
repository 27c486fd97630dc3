/**
 * One request's life on a frontend, as a pure state machine: every decision about what a request does next
 * (which prefix entry, when to retry, when to park and where, when to give up, when to prune) is made here,
 * once. The frontend service runs it over gRPC and timers (services/frontend Dispatcher), the simulator over
 * its event queue (libs/sim SwayamCluster); neither decides anything this module decides.
 *
 * `stepDispatch(state, event, view, settings, out)` consumes one event and appends the actions the driver
 * must carry out to `out`. Time (`view.now`) and randomness (`view.random`) are arguments; there is no I/O,
 * no timer and no clock in here. The state object is mutable and owned by the driver (the simulator reuses
 * one per request slot, so a busy run does not allocate one per request).
 *
 * The discipline (Swayam, Gujarati et al., Middleware'17, sections 4.4 and 4.5, plus late binding):
 *  - A request goes to a random untried entry among the first n usable entries of the ordered list.
 *  - Refused busy or provisioning, it probes an untried entry at once; once every entry of the prefix has
 *    refused it, it parks at `parkFanout` of them for one window (late binding: the first backend to hold a
 *    slot for it gets it, the other parks are withdrawn). With parking off, or refused cold, draining or
 *    not assigned, it retries after delta; a round in which every entry refused ends with libs/swayam's
 *    round backoff on top of delta (young requests back off, old ones do not).
 *  - A backend that cannot be reached is suspected (skipped for a while by the driver) and the request goes
 *    elsewhere at once; a request that timed out on `maxTimedOutAttempts` backends ends there. A final error
 *    from a backend (bad input) ends the request with that error.
 *  - A request ends when it could not start before its give-up time (its deadline less the reserve needed to
 *    still answer in time), or, with pruning on, once it has been refused and can no longer finish within
 *    RT_max.
 */
import { type Random, randomInt } from "@infergrid/core";
import { cheapestTargets, PARK_DEFAULTS, parkTargets } from "./parking-lot.js";
import {
  EVERY_ENTRY,
  effectivePrefix,
  hasUntried,
  type IndexSet,
  pickCheapest,
  pickOutside,
  prefixEnd,
  prefixSize,
  type UsablePredicate,
} from "./prefix-dispatch.js";
import { isPastSaving } from "./pruning.js";
import { ROUND_BACKOFF_DEFAULTS, type RoundBackoffOptions, roundBackoffMs } from "./round-backoff.js";
import { TriedEntries } from "./tried-entries.js";

/** Why a backend refused an Execute. */
export type DispatchRefusal = "busy" | "cold" | "provisioning" | "draining" | "not-assigned";

/** How a park call ended without a slot. `unreachable`: the call failed (the entry is suspected). */
export type ParkEnding = "timed-out" | "cold" | "draining" | "not-assigned" | "withdrawn" | "unreachable" | "error";

export type DispatchEvent<H> =
  /** The request reached the frontend. */
  | { readonly kind: "arrived" }
  /** The outstanding Execute answered with a result. */
  | { readonly kind: "answered" }
  /** The outstanding Execute was refused. */
  | { readonly kind: "refused"; readonly reason: DispatchRefusal }
  /**
   * The outstanding Execute failed in a way another backend may not (unreachable, hung, timed out). `timedOut`:
   * the backend was reached but did not answer within the attempt's allowance (its deadline passed there).
   * `notRun`: the backend said at once why it could not finish the request within the allowance (what it
   * said); it counts as a timeout, and the backend, which answered, is not suspected.
   */
  | { readonly kind: "failed"; readonly timedOut?: boolean; readonly notRun?: string }
  /** The outstanding Execute ran into the request's own deadline: the request is over, the backend not to blame. */
  | { readonly kind: "expired" }
  /** The outstanding Execute ended with an error no other backend would avoid (the request itself is bad). */
  | { readonly kind: "rejected"; readonly code: number; readonly message: string }
  /** A park call of round `round` (its `target`-th entry) answered with a slot held for the request. */
  | { readonly kind: "held"; readonly round: number; readonly target: number; readonly hold: H }
  /** A park call of round `round` ended without a slot. */
  | { readonly kind: "park-ended"; readonly round: number; readonly target: number; readonly how: ParkEnding }
  /** The timer set for round `round` elapsed. */
  | { readonly kind: "timer"; readonly round: number }
  /** The caller went away: nobody waits for the answer any more. */
  | { readonly kind: "cancelled" };

export type DispatchFailure = "unavailable" | "deadline-exceeded" | "pruned" | "rejected" | "cancelled";

export type DispatchAction<K, H> =
  /** Execute at list entry `index` (`entry`), `delayMs` from now; in the slot `hold` if given. */
  | {
      readonly kind: "send";
      readonly index: number;
      readonly entry: K;
      readonly delayMs: number;
      readonly attempt: number;
      readonly hold: H | undefined;
    }
  /** Park at these list entries for `waitMs`; answers come back as held / park-ended events of `round`. */
  | {
      readonly kind: "park";
      readonly round: number;
      readonly indices: readonly number[];
      readonly entries: readonly K[];
      readonly waitMs: number;
      readonly ageMs: number;
    }
  /** Withdraw round `round`'s parks at these entries (they have not answered); a slot held meanwhile is given back. */
  | { readonly kind: "withdraw"; readonly round: number; readonly entries: readonly K[] }
  /** Give back a slot held for the request that it will not use. */
  | { readonly kind: "release"; readonly hold: H }
  /** The entry refused cold: warm it up. */
  | { readonly kind: "warm"; readonly index: number; readonly entry: K }
  /** The entry could not be reached: skip it for a while. */
  | { readonly kind: "suspect"; readonly entry: K }
  /** Deliver a timer event for `round` at time `at`. */
  | { readonly kind: "timer"; readonly round: number; readonly at: number }
  /** The request is answered with the outstanding Execute's result. */
  | { readonly kind: "answer" }
  /** The request ends with this error; `code` is the rejecting backend's status for `rejected`. */
  | { readonly kind: "fail"; readonly status: DispatchFailure; readonly message: string; readonly code?: number };

/**
 * Where a step's actions go, in order: an array will do; a driver stepping millions of times keeps its own buffer
 * (emptying an array by setting its length to 0 drops its storage, and the next push allocates another).
 */
export interface ActionSink<K, H> {
  push(action: DispatchAction<K, H>): unknown;
}

export interface DispatchSettings {
  /** delta: the gap before retrying a refused request. */
  retryGapMs: number;
  /** Late binding: how long a park round lasts (0: Swayam's probing, no parking). */
  parkWindowMs: number;
  /** Entries of the prefix a request parks at. */
  parkFanout: number;
  /** Past the window, how long park answers may still take before the round ends without them. */
  parkAnswerGraceMs: number;
  /** The round backoff's longest pause and urgency threshold (libs/swayam roundBackoffMs). */
  backoff: Omit<RoundBackoffOptions, "deltaMs">;
  /**
   * Attempts that may time out (`failed` with `timedOut`) before the request ends deadline-exceeded. A request
   * that outlasts its allowance on this many backends is slow itself (a poison request), not unlucky: tried on
   * every backend in turn it tied each one up and had each suspected, until no backend of the service was left
   * for anyone. One more than one, so that a single hung backend still only costs a retry.
   */
  maxTimedOutAttempts: number;
}

export const DISPATCH_DEFAULTS: DispatchSettings = {
  retryGapMs: 5,
  parkWindowMs: PARK_DEFAULTS.windowMs,
  parkFanout: PARK_DEFAULTS.fanout,
  parkAnswerGraceMs: 200,
  backoff: ROUND_BACKOFF_DEFAULTS,
  maxTimedOutAttempts: 2,
};

/** What the machine may look at when it decides: the service as the frontend sees it now. */
export interface DispatchView<K> {
  now: number;
  /** The prefix length the frontend dispatches into. */
  n: number;
  /** Entries in the service's ordered list (0: the service has no backends). */
  listLength: number;
  /** The identity of entry `index` (a backend id), stable across list versions; distinct entries, distinct keys. */
  key(index: number): K;
  /** Whether entry `index` may take requests (not suspected); undefined: every entry may. */
  usable?: UsablePredicate | undefined;
  /** RT_max. */
  rtMaxMs: number;
  /** The service time pruning assumes; undefined when pruning is off. */
  pruneServiceMs: number | undefined;
  random: Random;
  /**
   * Heterogeneous pools (Kairos): what sending this request to entry `index` costs (libs/kairos requestCost:
   * instance time weighted by the type's heterogeneity coefficient, penalised when it may miss QoS), Infinity
   * where it cannot meet QoS even on an idle instance. Given, the request goes to the cheapest untried entry
   * of the prefix and parks at the cheapest ones, never at an infinite one while the prefix has a finite one
   * (it waits for the instance that can serve it rather than go where it will be late); undefined, to a
   * uniformly random entry (Swayam).
   */
  cost?: ((index: number) => number) | undefined;
}

export type DispatchPhase = "new" | "sending" | "parked" | "done";

export interface DispatchState<K> {
  phase: DispatchPhase;
  arrivedAt: number;
  /** The latest time an attempt may start: the deadline less the time an answer needs to get back. */
  giveUpAt: number;
  attempts: number;
  /** Attempts that timed out at a backend. */
  timeouts: number;
  refusals: number;
  /** Rounds in which every prefix entry refused. */
  rounds: number;
  /** Entries tried in the current round. */
  readonly tried: TriedEntries<K>;
  /** The current park round (unique for the state object's whole life, across reuse). */
  round: number;
  parkEndsAt: number;
  parkIndices: readonly number[];
  parkEntries: readonly K[];
  /** Bit i set: park call i of the current round has not answered yet. */
  parkOpen: number;
  /** The outstanding Execute: entry index (in the list when sent) and identity. */
  sendingIndex: number;
  sendingEntry: K | undefined;
  /** Whether the outstanding Execute runs in a held slot (its refusal then means the hold had expired). */
  sendingHeld: boolean;
}

/**
 * A state for a request that arrived at `arrivedAt` and must start by `giveUpAt`. With `reuse`, that object is
 * reset and returned (its round counter goes on, so messages of its previous request stay stale).
 */
export function newDispatch<K>(arrivedAt: number, giveUpAt: number, reuse?: DispatchState<K>): DispatchState<K> {
  if (reuse) {
    reuse.phase = "new";
    reuse.arrivedAt = arrivedAt;
    reuse.giveUpAt = giveUpAt;
    reuse.attempts = 0;
    reuse.timeouts = 0;
    reuse.refusals = 0;
    reuse.rounds = 0;
    reuse.tried.clear();
    reuse.round += 1;
    reuse.parkEndsAt = 0;
    reuse.parkIndices = NO_INDICES;
    reuse.parkEntries = NO_ENTRIES;
    reuse.parkOpen = 0;
    reuse.sendingIndex = -1;
    reuse.sendingEntry = undefined;
    reuse.sendingHeld = false;
    return reuse;
  }
  return {
    phase: "new",
    arrivedAt,
    giveUpAt,
    attempts: 0,
    timeouts: 0,
    refusals: 0,
    rounds: 0,
    tried: new TriedEntries<K>(),
    round: 0,
    parkEndsAt: 0,
    parkIndices: NO_INDICES,
    parkEntries: NO_ENTRIES,
    parkOpen: 0,
    sendingIndex: -1,
    sendingEntry: undefined,
    sendingHeld: false,
  };
}

/** Whether a park of round `round` still waits for a slot (a backend holds slots only for such parks). */
export function isParkedIn(state: DispatchState<unknown>, round: number): boolean {
  return state.phase === "parked" && state.round === round;
}

const NO_INDICES: readonly number[] = [];
/** Shared, like NO_INDICES: a fresh empty array per request was garbage the simulator paid for (frozen: never written). */
const NO_ENTRIES: readonly never[] = Object.freeze([]);
/** The one answer action: it carries nothing, so every step can hand out the same (frozen) object. */
const ANSWER: DispatchAction<never, never> = Object.freeze({ kind: "answer" });
const NOTHING_TRIED: IndexSet = { has: () => false };
/** Refusals after which a request may park (busy or provisioning): two compares, not a Set look-up per refusal. */
const parkable = (reason: DispatchRefusal): boolean => reason === "busy" || reason === "provisioning";

/** Feeds one event; the actions it calls for are appended to `out`. Events that no longer apply are ignored. */
export function stepDispatch<K, H>(
  st: DispatchState<K>,
  ev: DispatchEvent<H>,
  view: DispatchView<K>,
  settings: DispatchSettings,
  out: ActionSink<K, H>,
): void {
  switch (ev.kind) {
    case "arrived":
      if (st.phase === "new") tryNext(st, view, settings, out, 0);
      return;
    case "answered":
      if (st.phase !== "sending") return;
      st.phase = "done";
      out.push(ANSWER);
      return;
    case "rejected":
      if (st.phase !== "sending") return;
      end(st, out, "rejected", ev.message, ev.code);
      return;
    case "failed":
      if (st.phase !== "sending") return;
      if (ev.notRun === undefined) out.push({ kind: "suspect", entry: st.sendingEntry as K });
      if ((ev.timedOut === true || ev.notRun !== undefined) && ++st.timeouts >= settings.maxTimedOutAttempts)
        end(
          st,
          out,
          "deadline-exceeded",
          ev.notRun === undefined
            ? `timed out on ${st.timeouts} backends, each past its attempt allowance: not tried on more (a request this slow ties up every backend it goes to)`
            : `not run: ${st.timeouts} backends could not finish it within its attempt allowance (the last: ${ev.notRun})`,
        );
      else if (view.now >= st.giveUpAt) giveUp(st, out);
      else tryNext(st, view, settings, out, 0);
      return;
    case "expired":
      if (st.phase !== "sending") return;
      end(st, out, "deadline-exceeded", `deadline passed while a backend ran it (${st.attempts} attempts)`);
      return;
    case "refused":
      if (st.phase !== "sending") return;
      refused(st, ev.reason, view, settings, out);
      return;
    case "held":
      held(st, ev, view, out);
      return;
    case "park-ended":
      parkEnded(st, ev.round, ev.target, ev.how, view, settings, out);
      return;
    case "timer":
      if (st.phase === "parked" && ev.round === st.round) {
        // The window and its grace are over: whoever has not answered is withdrawn; probe again at once.
        withdrawOpen(st, out);
        endRound(st, view, settings, out, 0);
      }
      return;
    case "cancelled":
      // Open parks are withdrawn (their slots go back), an outstanding Execute is the driver's to cancel, and
      // a slot held for the request afterwards is released, as for any request that is over.
      if (st.phase !== "done") end(st, out, "cancelled", `cancelled by the caller after ${st.attempts} attempts`);
      return;
  }
}

function refused<K, H>(
  st: DispatchState<K>,
  reason: DispatchRefusal,
  view: DispatchView<K>,
  settings: DispatchSettings,
  out: ActionSink<K, H>,
): void {
  st.refusals += 1;
  if (reason === "cold") out.push({ kind: "warm", index: st.sendingIndex, entry: st.sendingEntry as K });
  if (settings.parkWindowMs > 0 && parkable(reason)) {
    // Late binding once every entry of the round has refused: while one is untried (it may be free), probe it
    // at once. A held slot that turned out expired sends the request back to parking.
    const tried = st.sendingHeld ? NO_ROOM : triedWithRoom(st, view);
    if (tried !== NO_ROOM) tryNext(st, view, settings, out, 0, tried >= 0 ? tried : undefined);
    else parkRound(st, view, settings, out);
    return;
  }
  tryNext(st, view, settings, out, settings.retryGapMs);
}

/**
 * The next attempt, `gapMs` from now: a random untried entry of the prefix. When every entry was tried, a new
 * round starts after the round backoff; when none is usable at all, one of the prefix is probed anyway rather
 * than giving up (a suspected backend may be back).
 */
function tryNext<K, H>(
  st: DispatchState<K>,
  view: DispatchView<K>,
  settings: DispatchSettings,
  out: ActionSink<K, H>,
  gapMs: number,
  knownTried?: number,
): void {
  if (view.listLength === 0) {
    end(st, out, "unavailable", "the service has no backends");
    return;
  }
  let gap = gapMs;
  let index = pick(st, view, true, knownTried);
  if (index === undefined && st.tried.size > 0) {
    st.tried.clear();
    st.rounds += 1;
    // Field by field: a spread here took V8's slow path on every round of a probing request.
    const backoff: RoundBackoffOptions = {
      deltaMs: settings.retryGapMs,
      maxGapMs: settings.backoff.maxGapMs,
      urgentFraction: settings.backoff.urgentFraction,
    };
    gap += roundBackoffMs(st.rounds, view.now - st.arrivedAt, view.rtMaxMs, backoff);
    index = pick(st, view, false);
  }
  index ??= randomInt(view.random, Math.max(1, Math.min(view.n, view.listLength)));
  const at = view.now + gap;
  if (at + settings.retryGapMs >= st.giveUpAt) {
    giveUp(st, out);
    return;
  }
  if (pastSaving(st, view, at, st.attempts)) {
    prune(st, view, out);
    return;
  }
  const entry = view.key(index);
  st.attempts += 1;
  st.tried.add(entry, index);
  st.phase = "sending";
  st.sendingIndex = index;
  st.sendingEntry = entry;
  st.sendingHeld = false;
  out.push({ kind: "send", index, entry, delayMs: gap, attempt: st.attempts, hold: undefined });
}

/**
 * The entry to try: the cheapest untried one when the view prices entries (Kairos), else a random one (Swayam).
 * `knownTried`: triedWithRoom's count, just taken in this step (st.tried.found still holds those entries), so
 * that a refusal does not look up the tried entries twice (a long prefix probed entry after entry made that
 * lookup a large cost of the simulator's Azure runs).
 */
function pick<K>(st: DispatchState<K>, view: DispatchView<K>, withTried: boolean, knownTried?: number): number | undefined {
  if (view.cost !== undefined)
    return pickCheapest(view.n, view.usable ?? EVERY_ENTRY, excludedSet(st, view, withTried), view.cost, view.random, view.listLength);
  const end = prefixEnd(view.n, view.usable, view.listLength);
  return pickOutside(end, view.usable, st.tried.found, withTried ? (knownTried ?? triedIn(st, view, end)) : 0, view.random);
}

/** triedWithRoom: no entry of the prefix is left to try this round. */
const NO_ROOM = -1;
/** triedWithRoom: one is left, not counted (the view prices entries, and pick counts its own way). */
const UNCOUNTED = -2;

/**
 * Whether an entry of the prefix may still be tried this round: NO_ROOM if none may; otherwise how many of the
 * prefix were tried (what pick would count again), or UNCOUNTED.
 */
function triedWithRoom<K>(st: DispatchState<K>, view: DispatchView<K>): number {
  if (view.cost !== undefined)
    return hasUntried(view.n, view.usable ?? EVERY_ENTRY, excludedSet(st, view), view.listLength) ? UNCOUNTED : NO_ROOM;
  const end = prefixEnd(view.n, view.usable, view.listLength);
  const tried = triedIn(st, view, end);
  return prefixSize(end, view.usable) > tried ? tried : NO_ROOM;
}

/** The prefix entries (before `end`) tried this round: how many, their indices ascending in st.tried.found. */
function triedIn<K>(st: DispatchState<K>, view: DispatchView<K>, end: number): number {
  return st.tried.size === 0 ? 0 : st.tried.indicesIn(end, view);
}

/** Late binding: park at `parkFanout` entries of the prefix for one window, or probe again if none can hold it. */
function parkRound<K, H>(st: DispatchState<K>, view: DispatchView<K>, settings: DispatchSettings, out: ActionSink<K, H>): void {
  const now = view.now;
  if (pastSaving(st, view, now, Math.max(1, st.attempts))) {
    prune(st, view, out);
    return;
  }
  let waitMs = Math.min(settings.parkWindowMs, st.giveUpAt - now - settings.retryGapMs);
  // With pruning the round ends when the request can no longer make it, so that it is dropped then.
  if (view.pruneServiceMs !== undefined) waitMs = Math.min(waitMs, st.arrivedAt + view.rtMaxMs - view.pruneServiceMs - now);
  const prefix = effectivePrefix(view.n, view.usable ?? EVERY_ENTRY, view.listLength);
  const cost = view.cost;
  const servable = cost === undefined ? prefix : prefix.filter((i) => cost(i) < Number.POSITIVE_INFINITY);
  const indices =
    cost === undefined || servable.length === 0
      ? parkTargets(prefix, settings.parkFanout, view.random)
      : cheapestTargets(servable, settings.parkFanout, cost, view.random);
  if (indices.length === 0 || !(waitMs > 0)) {
    endRound(st, view, settings, out, settings.retryGapMs);
    return;
  }
  st.round += 1;
  st.phase = "parked";
  st.parkEndsAt = now + waitMs;
  st.parkIndices = indices;
  st.parkEntries = indices.map((i) => view.key(i));
  st.parkOpen = (1 << indices.length) - 1;
  out.push({ kind: "park", round: st.round, indices, entries: st.parkEntries, waitMs, ageMs: now - st.arrivedAt });
  out.push({ kind: "timer", round: st.round, at: st.parkEndsAt + settings.parkAnswerGraceMs });
}

function held<K, H>(
  st: DispatchState<K>,
  ev: { readonly round: number; readonly target: number; readonly hold: H },
  view: DispatchView<K>,
  out: ActionSink<K, H>,
): void {
  const bit = 1 << ev.target;
  if (st.phase !== "parked" || ev.round !== st.round || (st.parkOpen & bit) === 0) {
    // Taken elsewhere, answered, or a round that is over: the slot goes back to the backend.
    out.push({ kind: "release", hold: ev.hold });
    return;
  }
  st.parkOpen &= ~bit;
  withdrawOpen(st, out);
  if (pastSaving(st, view, view.now, Math.max(1, st.attempts))) {
    out.push({ kind: "release", hold: ev.hold });
    prune(st, view, out);
    return;
  }
  const index = st.parkIndices[ev.target] as number;
  const entry = st.parkEntries[ev.target] as K;
  st.attempts += 1;
  st.phase = "sending";
  st.sendingIndex = index;
  st.sendingEntry = entry;
  st.sendingHeld = true;
  out.push({ kind: "send", index, entry, delayMs: 0, attempt: st.attempts, hold: ev.hold });
}

function parkEnded<K, H>(
  st: DispatchState<K>,
  round: number,
  target: number,
  how: ParkEnding,
  view: DispatchView<K>,
  settings: DispatchSettings,
  out: ActionSink<K, H>,
): void {
  const bit = 1 << target;
  if (st.phase !== "parked" || round !== st.round || (st.parkOpen & bit) === 0) return;
  st.parkOpen &= ~bit;
  const entry = st.parkEntries[target] as K;
  // A call that failed without the backend's answer (its deadline passed, the connection broke) may have left a
  // slot held there for the request: withdraw it, so that the slot is given back now rather than when its hold
  // expires.
  if (how === "error" || how === "unreachable") out.push({ kind: "withdraw", round, entries: [entry] });
  if (how === "cold") out.push({ kind: "warm", index: st.parkIndices[target] as number, entry });
  else if (how === "unreachable") out.push({ kind: "suspect", entry });
  if (st.parkOpen !== 0) return;
  // Every park ended without a slot: at the window's end probe again at once; earlier (all refused), after delta.
  endRound(st, view, settings, out, view.now >= st.parkEndsAt ? 0 : settings.retryGapMs);
}

/** A park round ended without a slot: a fresh round of probing. */
function endRound<K, H>(
  st: DispatchState<K>,
  view: DispatchView<K>,
  settings: DispatchSettings,
  out: ActionSink<K, H>,
  gapMs: number,
): void {
  st.tried.clear();
  st.parkOpen = 0;
  tryNext(st, view, settings, out, gapMs);
}

function withdrawOpen<K, H>(st: DispatchState<K>, out: ActionSink<K, H>): void {
  if (st.parkOpen === 0) return;
  const entries: K[] = [];
  for (let i = 0; i < st.parkEntries.length; i++) if ((st.parkOpen & (1 << i)) !== 0) entries.push(st.parkEntries[i] as K);
  st.parkOpen = 0;
  out.push({ kind: "withdraw", round: st.round, entries });
}

/**
 * With a priced view (Kairos), the entries a request may not go to now: those tried this round (unless `withTried`
 * is false) and, when some prefix entry can serve the request within QoS, those that cannot. Asked only about
 * usable entries of the prefix.
 */
function excludedSet<K>(st: DispatchState<K>, view: DispatchView<K>, withTried = true): IndexSet {
  const usable = view.usable ?? EVERY_ENTRY;
  const m = withTried ? triedIn(st, view, prefixEnd(view.n, view.usable, view.listLength)) : 0;
  const found = st.tried.found;
  const tried: IndexSet = m === 0 ? NOTHING_TRIED : { has: (i) => isAmongFirst(found, m, i) };
  const cost = view.cost;
  if (cost === undefined) return tried;
  let servable = false;
  let inPrefix = 0;
  for (let i = 0; i < view.listLength && inPrefix < view.n && !servable; i++) {
    if (!usable(i)) continue;
    inPrefix++;
    servable = cost(i) < Number.POSITIVE_INFINITY;
  }
  if (!servable) return tried;
  return { has: (i) => tried.has(i) || cost(i) === Number.POSITIVE_INFINITY };
}

function isAmongFirst(xs: readonly number[], count: number, x: number): boolean {
  for (let i = 0; i < count; i++) if (xs[i] === x) return true;
  return false;
}

function pastSaving<K>(st: DispatchState<K>, view: DispatchView<K>, at: number, attempts: number): boolean {
  return view.pruneServiceMs !== undefined && isPastSaving(at, st.arrivedAt, view.pruneServiceMs, view.rtMaxMs, attempts);
}

function prune<K, H>(st: DispatchState<K>, view: DispatchView<K>, out: ActionSink<K, H>): void {
  end(
    st,
    out,
    "pruned",
    `pruned after ${st.attempts} attempts: it can no longer finish within the service's ${view.rtMaxMs} ms latency threshold`,
  );
}

function giveUp<K, H>(st: DispatchState<K>, out: ActionSink<K, H>): void {
  if (st.attempts === 0) end(st, out, "deadline-exceeded", "deadline passed before any backend was tried");
  else
    end(st, out, "unavailable", `no backend could take the request before its deadline (${st.attempts} attempts, ${st.refusals} refusals)`);
}

function end<K, H>(st: DispatchState<K>, out: ActionSink<K, H>, status: DispatchFailure, message: string, code?: number): void {
  st.phase = "done";
  withdrawOpen(st, out);
  out.push(code === undefined ? { kind: "fail", status, message } : { kind: "fail", status, message, code });
}
