import { copyFileSync, mkdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { repoRoot } from "@infergrid/testkit";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CliRun, childWithId, freshRunDir, removeRunDir, runCli } from "./test-support.js";

/**
 * The live console in a real browser: `npm start`'s CLI (real nats-server and service processes) with its
 * console, opened in headless Chromium (Debian's package, driven by playwright-core). The page's numbers are
 * checked against the cluster's own: the backends started, and each service's requests against the CLI's
 * progress lines (sent so far). A backend killed with SIGKILL must show up within a few seconds. Set
 * CONSOLE_SCREENSHOT=<path> to keep the screenshot (docs/console.png is made this way).
 */
const CHROMIUM = process.env.CHROMIUM_BIN ?? "/usr/bin/chromium";
const BACKENDS = 6;

interface Progress {
  at: number;
  service: string;
  sent: number;
}

let dir: string;
let browser: Browser | undefined;

beforeAll(() => {
  dir = freshRunDir("ig-console-");
});

afterAll(async () => {
  await browser?.close();
  await removeRunDir(dir);
});

async function text(page: Page, selector: string): Promise<string> {
  return (await page.locator(selector).first().textContent({ timeout: 5_000 })) ?? "";
}

async function waitFor<T>(what: string, timeoutMs: number, check: () => Promise<T | undefined>): Promise<{ value: T; ms: number }> {
  const start = Date.now();
  let last: unknown;
  while (Date.now() - start < timeoutMs) {
    try {
      const v = await check();
      if (v !== undefined) return { value: v, ms: Date.now() - start };
    } catch (err) {
      last = err;
    }
    await sleep(100);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String(last)}` : ""}`);
}

describe("console in a real browser (npm start's cluster, headless Chromium)", () => {
  it("shows the cluster's live numbers, updates, and shows a killed backend within seconds", { timeout: 150_000 }, async () => {
    let consoleUrl: string | undefined;
    let cliPid = 0;
    const progress: Progress[] = [];
    const run: Promise<CliRun<unknown>> = runCli(
      dir,
      // --no-restart: the killed backend stays down (the supervisor would start it again within seconds).
      ["--duration", "50", "--backends", String(BACKENDS), "--frontends", "2", "--no-onnx", "--no-restart"],
      {
        onLine: (line, pid) => {
          cliPid = pid;
          const url = /^console: (http:\/\/\S+)/.exec(line);
          if (url) consoleUrl = url[1];
          const p = /^\[\d+:\d+\/\d+:\d+\] ([a-z0-9-]+): .* sent (\d+), answered/.exec(line);
          if (p) progress.push({ at: Date.now(), service: p[1] ?? "", sent: Number(p[2]) });
        },
      },
    );
    run.catch(() => {});

    const { value: url } = await waitFor("the console's URL on stdout", 60_000, async () => consoleUrl);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
    });
    const page = await browser.newPage({ viewport: { width: 1400, height: 1800 } });
    const pageErrors: string[] = [];
    page.on("pageerror", (err) => pageErrors.push(err.message));
    await page.goto(url);
    await waitFor("the page to go live", 15_000, async () => ((await text(page, "[data-testid=status]")) === "live" ? true : undefined));

    // Every backend the CLI started is on the page.
    await waitFor(`${BACKENDS} live backends on the page`, 20_000, async () =>
      (await text(page, "[data-testid=cluster-backends]")) === String(BACKENDS) ? true : undefined,
    );

    // The page updates: its update counter and the server's sequence number move.
    const seqBefore = Number(await text(page, "[data-testid=seq]"));
    const updatesBefore = Number((await page.locator("body").getAttribute("data-updates")) ?? "0");
    await sleep(3_000);
    expect(Number(await text(page, "[data-testid=seq]"))).toBeGreaterThanOrEqual(seqBefore + 2);
    expect(Number((await page.locator("body").getAttribute("data-updates")) ?? "0")).toBeGreaterThanOrEqual(updatesBefore + 2);

    // Requests per service against the CLI's own count, read at the moment it printed it. The page lags by
    // up to a load report and an update (2 s at most here), so the tolerance is two seconds of load.
    const compared: string[] = [];
    await waitFor("two progress lines per service to compare", 30_000, async () => {
      const latest = new Map<string, Progress>();
      for (const p of progress) latest.set(p.service, p);
      for (const p of latest.values()) {
        if (Date.now() - p.at > 1_000 || compared.includes(`${p.service}@${p.at}`)) continue;
        const shown = Number(await text(page, `[data-service="${p.service}"] [data-testid=requests]`));
        const rate = p.sent / Math.max(1, (p.at - (progress[0]?.at ?? p.at)) / 1000 + 5);
        const tolerance = Math.max(10, 2.5 * rate, 0.15 * p.sent);
        expect(Math.abs(shown - p.sent), `${p.service}: page ${shown} vs CLI ${p.sent}`).toBeLessThanOrEqual(tolerance);
        compared.push(`${p.service}@${p.at}`);
      }
      return compared.length >= 4 ? true : undefined;
    });

    // Kill a backend that serves a service: its chip turns missing and the live count drops.
    const victim = await page.locator("[data-service] [data-backend-id]").first().getAttribute("data-backend-id");
    expect(victim).toBeTruthy();
    const pid = childWithId(cliPid, victim ?? "");
    expect(pid, `pid of ${victim}`).toBeDefined();
    process.kill(pid ?? 0, "SIGKILL");
    const seen = await waitFor(`${victim} shown missing`, 10_000, async () => {
      const states = await page.locator(`[data-backend-id="${victim}"]`).evaluateAll((els) => els.map((e) => e.getAttribute("data-state")));
      const count = await text(page, "[data-testid=cluster-backends]");
      return states.every((s) => s === "missing") || count === String(BACKENDS - 1) ? { states, count } : undefined;
    });
    expect(seen.ms, "time from SIGKILL to the page showing it").toBeLessThan(5_000);
    await waitFor("the live count to drop", 5_000, async () =>
      (await text(page, "[data-testid=cluster-backends]")) === String(BACKENDS - 1) ? true : undefined,
    );

    // Charts were drawn (uPlot canvases), and the page raised no error.
    expect(await page.locator("canvas").count()).toBeGreaterThanOrEqual(5);
    expect(pageErrors).toEqual([]);

    const shot = join(dir, "console.png");
    await page.screenshot({ path: shot, fullPage: true });
    expect(readFileSync(shot).length).toBeGreaterThan(20_000);
    const keep = process.env.CONSOLE_SCREENSHOT;
    if (keep) {
      const target = resolve(repoRoot, keep);
      mkdirSync(dirname(target), { recursive: true });
      copyFileSync(shot, target);
    }
    console.log(
      `console test: ${victim} killed, shown within ${seen.ms} ms; requests compared ${compared.length} times; screenshot ${shot}`,
    );
    await browser.close();
    browser = undefined;
    await run;
  });
});
