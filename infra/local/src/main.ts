#!/usr/bin/env node
/**
 * The local cluster in one command: `npm start` (see --help). Starts nats-server and every service
 * as a process, registers demo services, replays a workload through the broker, shows progress,
 * and ends with a per-service summary; Ctrl-C stops it all and still prints the summary.
 */
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { seededRandom } from "@infergrid/core";
import { grpc, setDefaultGrpcCredentials } from "@infergrid/runtime";
import { repoRoot } from "@infergrid/testkit";
import { arrivalSchedule } from "@infergrid/workload";
import { BestEffortWatch, bestEffortSpec, renderJob } from "./best-effort.js";
import type { InputKind } from "./catalogue.js";
import { BrokerClient, buildInputs, listServices, registerServices } from "./client.js";
import { applyFixedPeak } from "./fixed-peak.js";
import { batchSampler, isLarge, type KairosSetting, loadKairosSetting } from "./kairos-setting.js";
import { LiveView } from "./live-view.js";
import { LoadGenerator, type Outcome } from "./load-generator.js";
import { type Cluster, DEMO_TIMING, missingServices, serviceEnv, startCluster } from "./local-cluster.js";
import { HeartbeatBackendSeconds, InUseTracker } from "./observers.js";
import { CommanderError, type Options, OptionsError, parseOptions, THEMIS_DEFAULTS } from "./options.js";
import { liveChildren, signalAllChildren } from "./processes.js";
import { ServiceStats } from "./stats.js";
import { renderSummary, type Summary, serviceSummary, totalsOf } from "./summary.js";
import { describeEvent } from "./supervisor.js";
import { loadThemisSetting, planThemisWorkload, type ThemisSetting, themisAllocatorEnv } from "./themis-setting.js";
import { renderTimeline, ThemisTimeline, watchThemis } from "./themis-timeline.js";
import { readTraceOption } from "./trace-source.js";
import { TypedStats } from "./typed-stats.js";
import { ControlPlaneWatch } from "./watch.js";
import { planKairosWorkload, planWorkload, type WorkloadPlan } from "./workload-plan.js";

const now = () => performance.timeOrigin + performance.now();
const say = (msg: string) => process.stdout.write(`${msg}\n`);
const STOP_TIMEOUT_MS = 10_000;

/** What Ctrl-C / SIGTERM do depends on how far the run is. */
class Interrupts {
  count = 0;
  private listeners: Array<(count: number) => void> = [];
  readonly first: Promise<void>;
  private resolveFirst: () => void = () => {};

  constructor() {
    this.first = new Promise((r) => {
      this.resolveFirst = r;
    });
    const on = (signal: NodeJS.Signals) => {
      this.count++;
      if (this.count === 1) process.stderr.write(`\n${signal}: stopping the load, then every process (again to hurry)\n`);
      if (this.count >= 3) {
        process.stderr.write(`\n${signal} a third time: killing everything now\n`);
        process.exit(130);
      }
      this.resolveFirst();
      for (const l of this.listeners) l(this.count);
    };
    for (const s of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.on(s, on);
  }

  get interrupted(): boolean {
    return this.count > 0;
  }

  onSignal(listener: (count: number) => void): void {
    this.listeners.push(listener);
  }
}

/** What "large" means in this setting, in words (the summary shows it too). */
function largeRule(k: KairosSetting): string {
  if (k.cheapest === undefined) return `no query is large: ${k.base} is the only type`;
  if (!Number.isFinite(k.largeAbove)) return `no query is large: ${k.cheapest} serves every query within ${k.model}'s ${k.qosMs} ms QoS`;
  return `large = batch > ${k.largeAbove}, the largest batch ${k.cheapest} serves within ${k.model}'s ${k.qosMs} ms QoS (mean of its profile); small = the rest`;
}

function kairosBanner(k: KairosSetting, options: Options): void {
  say(`  heterogeneous: ${k.model}, QoS ${k.qosMs} ms at p99 (${k.scenarioFile}), profiles ${k.profilesFile}`);
  for (const t of k.types)
    say(
      `    ${t.name}: ${t.maxCount} backends, ${t.pricePerHour} USD/h${t.name === k.base ? " (base type: meets QoS for every query)" : ""}`,
    );
  say(`    ${largeRule(k)}; batch sizes from Kairos's production mix, seed ${options.seed}`);
}

function banner(
  plan: WorkloadPlan,
  options: Options,
  runDir: string,
  kairos: KairosSetting | undefined,
  themis: ThemisSetting | undefined,
): void {
  const scaling =
    plan.scaling === "rate-scale"
      ? `--rate-scale ${plan.rateScale}`
      : plan.scaling === "peak-rps"
        ? "--peak-rps"
        : "auto: about half of each service's backend share at its busiest, at most 120 req/s";
  say(`InferGrid local cluster — logs in ${runDir}`);
  say(`workload: ${plan.description}, ${plan.trace.minutes} trace minutes at compression ${plan.compression}`);
  say(`  load: cluster peak ${plan.peakRps.toFixed(1)} req/s (${scaling}); runs ${(plan.durationMs / 1000).toFixed(0)} s`);
  for (const s of plan.services) {
    say(
      `  service ${s.name}: ${s.input === "ocr" ? "ONNX ppocr-mobile-cls" : `emulated, mean ${s.meanServiceMs.toFixed(0)} ms`}, SLO ${s.rtMaxMs} ms at p${s.slMin * 100}`,
    );
  }
  if (kairos) kairosBanner(kairos, options);
  if (themis) themisBanner(themis);
  say(
    `cluster: ${themis ? "backends from the allocator's pool" : `${backendCount(options, kairos)} backends`}, ${options.frontends} frontends (${options.policy}), backend idle timeout ${options.idleTimeoutMs} ms`,
  );
}

function backendCount(options: Options, kairos: KairosSetting | undefined, themis?: ThemisSetting): number {
  if (themis) return 0;
  return kairos ? kairos.types.reduce((a, t) => a + t.maxCount, 0) : options.backends;
}

function themisBanner(t: ThemisSetting): void {
  const p = t.fit.profile;
  say(
    `  vertical scaling: ${t.model}'s Themis profile l(b, c) = (${p.gamma.toFixed(2)} b + ${p.eps.toFixed(2)}) / c + ${p.delta.toFixed(2)} b + ${p.eta.toFixed(2)} ms, fitted to ${t.profilesFile} (mean error ${(t.fit.meanAbsPctError * 100).toFixed(1)} %)`,
  );
  say(
    `    SLO ${t.sloMs} ms, node limit ${t.nodeCores} cores, cold start ${t.coldStartMs} ms; the allocator's Themis controller resizes the backends and sizes the list, its local pool starts them`,
  );
}

async function run(options: Options, interrupts: Interrupts): Promise<number> {
  const kairos =
    options.kairos === undefined ? undefined : loadKairosSetting(options.kairos, options.types ?? [], options.profiles, options.seed);
  const trace = options.trace === undefined ? undefined : await readTraceOption(options.trace, options.topJobs);
  const themis =
    options.themis === undefined
      ? undefined
      : loadThemisSetting({
          model: options.themis,
          profiles: options.profiles,
          sloMs: options.sloMs,
          nodeCores: options.nodeCores,
          coldStartMs: options.coldStartMs,
          step: {
            baseRps: options.baseRps,
            stepRps: options.peakRps ?? THEMIS_DEFAULTS.stepRps,
            atS: options.stepAtS,
            forS: options.stepForS,
            durationS: options.durationS ?? THEMIS_DEFAULTS.durationS,
          },
        });
  const plan = themis ? planThemisWorkload(themis) : kairos ? planKairosWorkload(options, kairos.service) : planWorkload(options, trace);
  if (options.policy === "fixed-peak") {
    const sizes = applyFixedPeak(plan, options.backends);
    say(`fixed-peak: ${[...sizes].map(([name, n]) => `${name} ${n}`).join(", ")} backends`);
  }
  // The simulator's `infergrid` is a service that prunes the late requests its minute's SLO tail allows.
  if (options.policy === "infergrid") for (const svc of plan.services) svc.spec = { ...svc.spec, pruneLate: true };
  const missing = missingServices();
  if (missing.length > 0) {
    process.stderr.write(`error: the services are not built (missing ${missing.join(", ")}): run \`npm run build\` first\n`);
    return 1;
  }
  const stamp = new Date().toISOString().replace(/[:.]/g, "-");
  const runDir = resolve(options.runtimeDir ?? join(repoRoot, ".runtime"), `local-${stamp}`);
  mkdirSync(runDir, { recursive: true });
  banner(plan, options, runDir, kairos, themis);
  if (interrupts.interrupted) return 130;

  // Ctrl-C while processes start: stop them, which makes the start fail and unwind. Once it runs: no more
  // restarts (a wait under way is cancelled), the load stops, then every process.
  let cluster: Cluster | undefined;
  interrupts.onSignal(() => {
    if (!cluster) signalAllChildren("SIGTERM");
    else cluster.stopRestarts();
  });
  // A process died or came back: a line above the live view once it runs, a plain line before.
  let notice = (line: string): void => {
    say(`  ${line}`);
  };
  try {
    cluster = await startCluster(
      {
        backends: kairos || themis ? 0 : options.backends,
        ...(themis
          ? { allocatorEnv: (natsUrl: string) => themisAllocatorEnv(themis, serviceEnv(shapeOf(options), natsUrl, "backend", "")) }
          : {}),
        ...(kairos ? { typedPools: kairos.types.map((t) => ({ name: t.name, pricePerHour: t.pricePerHour, maxCount: t.maxCount })) } : {}),
        frontends: options.frontends,
        policy: options.policy,
        idleTimeoutMs: options.idleTimeoutMs,
        harvest: options.harvest,
        logLevel: options.logLevel,
        runDir,
        consolePort: options.consolePort,
        secure: !options.insecure,
      },
      (msg) => say(`  started ${msg}`),
      () => interrupts.interrupted,
      { restart: options.restart, onEvent: (event) => notice(describeEvent(event)) },
    );
  } catch (err) {
    removeNatsFiles(runDir);
    if (interrupts.interrupted) {
      say("interrupted while starting; every process is stopped");
      return 130;
    }
    throw err;
  }
  if (cluster.grpcCallers) {
    // Every client of this process then checks the servers' certificates by the name they carry (createClient
    // applies the default channel options whatever credentials a call site passes); this CLI serves nothing.
    setDefaultGrpcCredentials({
      server: grpc.ServerCredentials.createInsecure(),
      client: cluster.grpcCallers.client,
      channelOptions: cluster.grpcCallers.channelOptions,
    });
  }
  const staleMs = 4 * DEMO_TIMING.heartbeatMs;
  const meter = new HeartbeatBackendSeconds(staleMs);
  const inUse = new InUseTracker(2_500);
  let watch: ControlPlaneWatch | undefined;
  let broker: BrokerClient | undefined;
  // Watching from before the service exists: the backends warm when the load begins are the initial ones.
  const timeline = themis ? new ThemisTimeline(themis.service.name, themis.sloMs, staleMs) : undefined;
  let closeTimeline: (() => Promise<void>) | undefined;
  try {
    watch = await ControlPlaneWatch.open(cluster.natsUrl, cluster.natsObserver, meter, inUse, now);
    if (timeline) closeTimeline = await watchThemis(cluster.natsUrl, cluster.natsObserver, timeline, now);
    await registerServices(cluster.allocator.ready.grpcAddress ?? "", plan.services, cluster.grpcCallers?.admin);
    const kinds = new Set<InputKind>(plan.services.map((s) => s.input));
    const inputsByKind = await buildInputs(kinds);
    broker = new BrokerClient(
      cluster.broker.ready.grpcAddress ?? "",
      new Map(plan.services.map((s) => [s.name, inputsByKind[s.input]])),
      options.deadlineMs,
      cluster.grpcCallers?.client,
    );
    say(`console: http://${cluster.console.ready.httpAddress}/ (live; open it in a browser)`);
    say(`registered ${plan.services.length} services; waiting until each answers through the broker ...`);
    const client = broker;
    const serving = await Promise.all(plan.services.map((s) => client.waitServing(s.name, 60_000, () => interrupts.interrupted)));
    const notServing = plan.services.filter((_, i) => !serving[i]).map((s) => s.name);
    if (notServing.length > 0 && !interrupts.interrupted) say(`warning: not answering yet (going on anyway): ${notServing.join(", ")}`);
    if (kairos && !interrupts.interrupted) {
      const total = backendCount(options, kairos);
      const w = watch;
      say(`  waiting until all ${total} backends are warm for ${kairos.model} ...`);
      const end = Date.now() + 60_000;
      while (w.warmBackends(kairos.model) < total && Date.now() < end && !interrupts.interrupted) await sleep(200);
      if (w.warmBackends(kairos.model) < total) say(`warning: ${w.warmBackends(kairos.model)} of ${total} backends warm (going on anyway)`);
    }
    if (themis && !interrupts.interrupted) {
      const w = watch;
      const name = themis.service.name;
      const end = Date.now() + themis.coldStartMs + 30_000;
      while (w.warmBackends(name) < 1 && Date.now() < end && !interrupts.interrupted) await sleep(200);
    }
    for (const entry of await listServices(cluster.allocator.ready.grpcAddress ?? "", cluster.grpcCallers?.admin).catch(() => [])) {
      const ids = entry.backends.map((b) => b.backendId);
      say(`  ${entry.spec?.name}: ordered list of ${ids.length} backends [${ids.join(", ")}], ${entry.minWarm} kept warm`);
    }

    const stats = new Map(plan.services.map((s) => [s.name, new ServiceStats(s.name, s.rtMaxMs, s.slMin)]));
    const typed = kairos ? new TypedStats((batch) => isLarge(kairos, batch)) : undefined;
    const generator = new LoadGenerator({
      arrivals: arrivalSchedule(plan.trace, {
        compression: plan.compression,
        rateScale: plan.rateScale,
        random: seededRandom(options.seed),
      }),
      durationMs: plan.durationMs,
      send: broker.send,
      stats,
      maxInFlight: options.maxInFlight,
      now,
      ...(kairos && typed
        ? {
            batchOf: batchSampler(options.seed),
            onOutcome: (_service: string, batch: number | undefined, outcome: Outcome, latencyMs: number) => {
              if (batch !== undefined) typed.record(batch, outcome, latencyMs);
            },
          }
        : {}),
      ...(timeline
        ? {
            onOutcome: (_service: string, _batch: number | undefined, outcome: Outcome, latencyMs: number) =>
              timeline.onOutcome(outcome.ok, latencyMs, now() - latencyMs),
          }
        : {}),
    });
    const frame = () => {
      const t = now();
      return {
        elapsedMs: Math.min(generator.elapsedMs(), plan.durationMs),
        totalMs: plan.durationMs,
        inFlight: generator.inFlightCount,
        rows: plan.services.map((s) => {
          const st = stats.get(s.name) as ServiceStats;
          return {
            service: s.name,
            sloMs: s.rtMaxMs,
            live: st.live(t),
            totals: st.totals(),
            inUse: inUse.current(s.name, t),
            occupied: meter.occupiedNow(s.name, t),
          };
        }),
      };
    };
    const view = new LiveView(process.stdout, frame);
    notice = (line) => view.print(`  ${line}`);

    const bestEffort =
      options.bestEffortItems > 0
        ? new BestEffortWatch(cluster.allocator.ready.grpcAddress ?? "", now, cluster.grpcCallers?.admin)
        : undefined;
    const startedAt = new Date();
    const t0 = now();
    meter.begin(t0);
    inUse.begin();
    timeline?.begin(t0);
    const sampler = timeline ? setInterval(() => timeline.sample(now()), 1_000) : undefined;
    interrupts.onSignal((count) => {
      generator.stopSending();
      // A second Ctrl-C does not wait for answers: in-flight requests end as CANCELLED.
      if (count >= 2) generator.cancelInFlight();
    });
    if (bestEffort && !interrupts.interrupted) {
      const spec = bestEffortSpec(options.bestEffortItems, backendCount(options, kairos, themis) || 16);
      await bestEffort.submit(spec);
      say(
        `submitted best-effort job ${spec.name} (${spec.items} items); it runs on the backends inference lends${options.harvest ? " and in the serving backends' idle time" : ""}`,
      );
    }
    if (!interrupts.interrupted) {
      say("load running");
      generator.start();
      view.start();
      await Promise.race([generator.finished, interrupts.first]);
    }
    generator.stopSending();
    const loadSeconds = Math.min(generator.elapsedMs(), plan.durationMs) / 1000;
    if (generator.inFlightCount > 0) {
      view.stop();
      say(`load over; waiting for ${generator.inFlightCount} requests in flight (at most ${options.deadlineMs / 1000} s) ...`);
      view.detach();
    }
    if (!(await generator.drain(options.deadlineMs + 2_000))) {
      generator.cancelInFlight();
      await generator.drain(2_000);
    }
    const end = now();
    bestEffort?.stop();
    const job = bestEffort?.summary("batch-1", t0);
    meter.finish(end);
    inUse.finish();
    if (sampler) clearInterval(sampler);
    timeline?.sample(end);
    timeline?.finish(end);
    await closeTimeline?.();
    closeTimeline = undefined;
    view.stop();

    const w = watch;
    const services = plan.services.map((s) => {
      const summary = serviceSummary(
        s.name,
        s.rtMaxMs,
        s.slMin,
        (stats.get(s.name) as ServiceStats).totals(),
        meter.seconds(s.name, end),
        inUse.peakOf(s.name),
      );
      if (timeline && s.name === timeline.service) return { ...summary, coreSeconds: Number(timeline.coreSeconds().toFixed(1)) };
      if (!kairos || !typed || s.name !== kairos.model) return summary;
      const types = kairos.types.map((t) => ({ name: t.name, backends: t.maxCount, pricePerHour: t.pricePerHour }));
      const rule = { largeAbove: kairos.largeAbove, largeRule: largeRule(kairos), baseType: kairos.base };
      return { ...summary, byInstanceType: typed.summary(types, (id) => w.instanceTypeOf(id), rule) };
    });
    const poolBackends = kairos ? watch.backendsSeen() : [];
    const summary: Summary = {
      startedAt: startedAt.toISOString(),
      runDir,
      workload: `${plan.description}, peak ${plan.peakRps.toFixed(1)} req/s`,
      loadSeconds: Number(loadSeconds.toFixed(2)),
      interrupted: interrupts.interrupted,
      backends: backendCount(options, kairos, themis),
      frontends: options.frontends,
      policy: options.policy,
      maxSendLagMs: Number(generator.maxLagMs.toFixed(1)),
      services,
      totals: totalsOf(services),
    };
    say("stopping the services ...");
    await watch.close();
    watch = undefined;
    broker.close();
    broker = undefined;
    await cluster.stop(interrupts.count >= 2 ? 2_000 : STOP_TIMEOUT_MS);
    removeNatsFiles(runDir);
    say(`all processes stopped (${liveChildren()} left); logs in ${runDir}\n`);
    // Counted once every process has stopped: none is restarted after that.
    summary.restarts = cluster.restarts();
    say(renderSummary(summary));
    if (job) say(renderJob(job));
    const themisRun = themis && timeline ? themisOf(themis, timeline.summary()) : undefined;
    if (themis && themisRun) {
      const { atS, forS } = themis.step;
      say(renderTimeline(themisRun.timeline, (second) => second >= atS && second < atS + forS));
    }
    if (options.summaryJson) {
      const path = resolve(options.summaryJson);
      mkdirSync(dirname(path), { recursive: true });
      // pid: the last process; pids: every one it ran as (restarts add one each).
      const processes = cluster.all().map((c) => ({ name: c.name, pid: c.pid, pids: c.pids, restarts: c.restarts, log: c.logPath }));
      const heterogeneous = kairos ? kairosOf(kairos, poolBackends) : undefined;
      writeFileSync(
        path,
        `${JSON.stringify({ ...summary, replay: replayOf(plan, options), processes, heterogeneous, themis: themisRun, bestEffortJob: job }, null, 2)}\n`,
      );
      say(`summary written to ${path}`);
    }
    if (summary.totals.lost > 0) return 1;
    return interrupts.interrupted ? 130 : 0;
  } finally {
    await watch?.close().catch(() => {});
    await closeTimeline?.().catch(() => {});
    broker?.close();
    if (cluster && liveChildren() > 0) await cluster.stop(interrupts.count >= 2 ? 1_000 : STOP_TIMEOUT_MS);
  }
}

/** The JetStream store only matters while the cluster runs; the logs stay. */
function removeNatsFiles(runDir: string): void {
  for (const name of readdirSync(runDir)) {
    if (/^nats-(store|ports)/.test(name)) rmSync(join(runDir, name), { recursive: true, force: true });
  }
}

/** The heterogeneous mode's setting in the JSON summary, with the backends the allocator's pools started. */
function kairosOf(k: KairosSetting, backends: Array<{ id: string; instanceType: string; address: string }>) {
  return {
    model: k.model,
    qosMs: k.qosMs,
    scenario: k.scenarioFile,
    profiles: k.profilesFile,
    baseType: k.base,
    largeAbove: Number.isFinite(k.largeAbove) ? k.largeAbove : null,
    types: k.types.map((t) => ({ name: t.name, backends: t.maxCount, pricePerHour: t.pricePerHour })),
    backends,
  };
}

/** The vertical-scaling mode's setting and timeline in the JSON summary. */
function themisOf(t: ThemisSetting, timeline: ReturnType<ThemisTimeline["summary"]>) {
  return {
    model: t.model,
    profiles: t.profilesFile,
    profile: t.fit.profile,
    fitMeanAbsPctError: Number(t.fit.meanAbsPctError.toFixed(4)),
    sloMs: t.sloMs,
    nodeCores: t.nodeCores,
    coldStartMs: t.coldStartMs,
    step: t.step,
    timeline,
  };
}

/** The shape serviceEnv needs for a backend's own settings (the pool's backends inherit them through the allocator). */
function shapeOf(options: Options) {
  return {
    backends: 0,
    frontends: options.frontends,
    policy: options.policy,
    idleTimeoutMs: options.idleTimeoutMs,
    harvest: options.harvest,
    logLevel: options.logLevel,
    runDir: "",
    consolePort: 0,
    secure: !options.insecure,
  };
}

function replayOf(plan: WorkloadPlan, options: Options) {
  return {
    source: plan.description,
    services: plan.services.map((s) => s.name),
    fromMinute: options.fromMinute,
    minutes: plan.trace.minutes,
    compression: plan.compression,
    rateScale: plan.rateScale,
    peakRps: Number(plan.peakRps.toFixed(3)),
    scaling: plan.scaling,
    durationS: plan.durationMs / 1000,
    seed: options.seed,
  };
}

async function main(): Promise<number> {
  let options: Options;
  try {
    options = parseOptions(process.argv.slice(2));
  } catch (err) {
    // Commander has printed the help or the error already.
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : 2;
    if (err instanceof OptionsError) {
      process.stderr.write(`error: ${err.message}\n(run with --help for the options)\n`);
      return 2;
    }
    throw err;
  }
  const interrupts = new Interrupts();
  try {
    return await run(options, interrupts);
  } catch (err) {
    if (err instanceof OptionsError) {
      process.stderr.write(`error: ${err.message}\n(run with --help for the options)\n`);
      return 2;
    }
    process.stderr.write(`error: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}

process.exit(await main());
