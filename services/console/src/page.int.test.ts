/**
 * The console's page in a real browser (headless Chromium, Debian's package, driven by playwright-core) against
 * the console's own web server and update hub, fed by a ClusterView: what the page does when the console turns
 * it away, and when a service leaves and comes back.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { ClusterView, updateJson } from "@infergrid/cluster-view";
import { control } from "@infergrid/proto";
import { createLogger } from "@infergrid/runtime";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startConsoleWeb, UpdateHub } from "./web.js";

const CHROMIUM = process.env.CHROMIUM_BIN ?? "/usr/bin/chromium";
const logger = createLogger("test", "console-page", "silent");

function entry(name: string): control.ServiceEntry {
  return control.ServiceEntry.create({
    spec: control.ServiceSpec.create({ name, sla: control.Sla.create({ latencyThresholdMs: 100, percentile: 99 }) }),
    backends: [],
    minWarm: 1,
  });
}

async function until(what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<number> {
  const start = Date.now();
  while (Date.now() - start < timeoutMs) {
    if (await check().catch(() => false)) return Date.now() - start;
    await sleep(100);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

describe("the console's page (headless Chromium)", () => {
  let browser: Browser;
  const cleanups: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
  }, 60_000);
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  afterAll(async () => {
    await browser?.close();
  });

  async function serve(maxClients: number) {
    const view = new ClusterView();
    view.onServiceEntry("svc", entry("svc"));
    view.sample(Date.now());
    const hub = new UpdateHub(maxClients, logger);
    const web = await startConsoleWeb({
      host: "127.0.0.1",
      port: 0,
      token: undefined,
      hub,
      fullUpdate: () => updateJson(view.update(Date.now(), "all")),
      logger,
    });
    cleanups.push(async () => {
      hub.close();
      await web.close();
    });
    return { view, hub, url: `http://${web.address}/` };
  }

  async function open(url: string): Promise<Page> {
    const page = await browser.newPage();
    cleanups.push(() => page.close());
    await page.goto(url);
    return page;
  }

  const status = (page: Page) => page.locator("[data-testid=status]").first().textContent();

  it("a page the console turned away (503: as many pages as it serves) connects again once there is room", async () => {
    const { url } = await serve(1);
    const first = await open(url);
    await until("the first page live", 10_000, async () => (await status(first)) === "live");
    const second = await open(url);
    await until("the second page turned away", 5_000, async () => (await status(second)) === "reconnecting…");
    await first.close();
    // Before, an EventSource answered 503 stayed closed for good: the page said "reconnecting…" for ever.
    const ms = await until("the second page live", 15_000, async () => (await status(second)) === "live");
    expect(ms).toBeLessThan(15_000);
  }, 60_000);

  it("a service that leaves and comes back gets its card and its charts again", async () => {
    const { view, hub, url } = await serve(4);
    const page = await open(url);
    const charts = () => page.locator('[data-service="svc"] .uplot').count();
    await until("the service's charts", 10_000, async () => (await charts()) === 4);
    const tick = () => {
      view.sample(Date.now());
      hub.broadcast(updateJson(view.update(Date.now(), "latest")));
    };
    view.onServiceEntry("svc", undefined);
    tick();
    await until("the card gone", 5_000, async () => (await page.locator('[data-service="svc"]').count()) === 0);
    view.onServiceEntry("svc", entry("svc"));
    tick();
    await until("the card back", 5_000, async () => (await page.locator('[data-service="svc"]').count()) === 1);
    // Before, the charts were reused inside the card that had been removed, and the new card had none.
    await until("the new card's charts", 5_000, async () => (await charts()) === 4);
  }, 60_000);
});
