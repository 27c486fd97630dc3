// The console's page: follows /api/events (server-sent events of proto3-JSON ConsoleUpdate messages, see
// proto/infergrid/console/v1/console.proto) and draws them with uPlot. Plain JavaScript, no build step:
// the page is small and served as is. Zero values are left out of proto3 JSON, hence the `?? 0`s.
/* global uPlot */

const $ = (id) => document.getElementById(id);
const el = (tag, attrs = {}, text) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
};
const fmt = (x, digits = 1) => (x === undefined || x === null || Number.isNaN(x) ? "–" : Number(x).toFixed(digits));
const pct = (num, den) => (den > 0 ? `${((100 * num) / den).toFixed(2)} %` : "–");

/** Series kept on the page: by key, arrays of [seconds, ...values]. */
const series = new Map();
const charts = new Map();
let historyMs = 10 * 60_000;

function appendPoints(key, points, columns) {
  let s = series.get(key);
  if (!s) {
    s = columns.map(() => []);
    series.set(key, s);
  }
  const xs = s[0];
  for (const p of points) {
    const t = (p.atUnixMs ?? 0) / 1000;
    if (xs.length > 0 && t <= xs[xs.length - 1]) continue;
    columns.forEach((col, i) => {
      s[i].push(i === 0 ? t : col(p));
    });
  }
  const horizon = xs.length > 0 ? xs[xs.length - 1] - historyMs / 1000 : 0;
  let drop = 0;
  while (drop < xs.length && xs[drop] < horizon) drop++;
  if (drop > 0) for (const col of s) col.splice(0, drop);
  return s;
}

function chart(key, parent, title, lines, opts = {}) {
  let c = charts.get(key);
  if (c) return c;
  const box = el("div", { class: "chart", "data-chart": key });
  parent.appendChild(box);
  const width = Math.max(360, Math.min(620, box.clientWidth || 520));
  c = new uPlot(
    {
      title,
      width,
      height: 180,
      scales: { x: { time: true }, y: { range: (_u, min, max) => [Math.min(0, min), max > 0 ? max * 1.1 : 1] } },
      series: [{}, ...lines.map((l) => ({ spanGaps: false, width: 1.5, ...l }))],
      axes: [{}, { size: 50 }],
      legend: { live: false },
      ...opts,
    },
    [[]].concat(lines.map(() => [])),
    box,
  );
  charts.set(key, c);
  return c;
}

const orNull = (has, v) => (has ? (v ?? 0) : null);

function renderCluster(u) {
  const c = u.cluster ?? {};
  $("cluster-backends").textContent = String(c.backends ?? 0);
  $("cluster-free").textContent = String(c.freeBackends ?? 0);
  $("cluster-loaned").textContent = String(c.loanedBackends ?? 0);
  const members = c.members ?? [];
  $("cluster-frontends").textContent = String(members.filter((m) => m.role === "frontend").length);
  const p = c.plan;
  $("plan").textContent = p
    ? `#${p.seq ?? 0} ${p.objective ?? ""}${p.solvedAtUnixMs ? ` = ${fmt(p.objectiveValue, 3)} (bound ${fmt(p.objectiveUpperBound, 3)}), solved in ${fmt(p.solveMs, 1)} ms` : " (no predictive solve yet)"} · pool ${p.poolSize ?? 0}, free ${p.freeBackends ?? 0}`
    : "no plan yet";

  const nF = new Map();
  for (const s of u.services ?? []) for (const f of s.frontends ?? []) nF.set(f.id, Math.max(nF.get(f.id) ?? 0, f.frontendsEstimate ?? 0));
  const tbody = $("members").querySelector("tbody");
  tbody.replaceChildren(
    ...members.map((m) => {
      const tr = el("tr", { "data-role": m.role, "data-id": m.id });
      tr.append(
        el("td", {}, m.role),
        el("td", {}, m.id),
        el("td", {}, m.address ?? ""),
        el("td", {}, m.role === "frontend" ? String(nF.get(m.id) ?? "–") : ""),
      );
      return tr;
    }),
  );
  const models = new Map((c.models ?? []).map((m) => [m.service, m.model]));
  $("shares")
    .querySelector("tbody")
    .replaceChildren(
      ...(p?.shares ?? []).map((s) => {
        const tr = el("tr");
        tr.append(
          el("td", {}, s.service),
          el("td", {}, String(s.share ?? 0)),
          el("td", {}, String(s.minWarm ?? 0)),
          el("td", {}, `${fmt(s.predictedRatePerS)} req/s`),
          el("td", {}, fmt(s.utility, 3)),
          el("td", {}, models.get(s.service) ?? "–"),
        );
        return tr;
      }),
    );
  $("pool").replaceChildren(...(c.pool ?? []).map(backendChip));
  $("events").replaceChildren(
    ...(c.events ?? [])
      .slice()
      .reverse()
      .map((e) =>
        el(
          "li",
          {},
          `${new Date(e.atUnixMs ?? 0).toLocaleTimeString()} ${e.kind} ${e.backendId ?? ""}${e.service ? ` → ${e.service}` : ""}${e.reason ? ` (${e.reason})` : ""}`,
        ),
      ),
  );
  const data = appendPoints("cluster", c.series ?? [], [
    (p) => p,
    (p) => p.backends ?? 0,
    (p) => p.free ?? 0,
    (p) => p.loaned ?? 0,
    (p) => p.busy ?? 0,
    (p) => p.frontends ?? 0,
  ]);
  chart("cluster", $("cluster-chart"), "Backends", [
    { label: "live", stroke: "#1d232a" },
    { label: "free", stroke: "#9ca3af" },
    { label: "loaned", stroke: "#0891b2" },
    { label: "busy", stroke: "#2563eb" },
    { label: "frontends", stroke: "#d97706" },
  ]).setData(data);
}

function backendChip(b) {
  return el(
    "span",
    {
      class: `chip ${b.state}`,
      "data-backend-id": b.id,
      "data-state": b.state,
      title: `${b.id}: ${b.state}${b.job ? ` (job ${b.job})` : ""}`,
    },
    b.id.replace(/^backend-?/, "").slice(-8),
  );
}

function serviceCard(name) {
  let card = document.querySelector(`[data-service="${CSS.escape(name)}"]`);
  if (card) return card;
  card = el("section", { class: "service", "data-service": name });
  card.append(
    el("h2", {}, name),
    el("div", { class: "tiles" }),
    el("div", { class: "chips", "data-testid": "backends" }),
    el("table", { "data-testid": "frontends" }),
    el("div", { class: "charts" }),
  );
  $("services").appendChild(card);
  return card;
}

function tile(id, value, label, bad = false) {
  const t = el("div", { class: bad ? "tile bad" : "tile" });
  t.append(el("b", { "data-testid": id }, value), el("span", {}, label));
  return t;
}

function renderService(s) {
  const card = serviceCard(s.name);
  const slo = s.sloMs ?? 0;
  const sl = s.slaPercentile ?? 99;
  const completed = s.completed ?? 0;
  const violations = completed - (s.withinSlo ?? 0);
  const windows = s.slaWindows ?? 0;
  const f = s.forecast;
  card
    .querySelector(".tiles")
    .replaceChildren(
      tile(
        "rate",
        `${fmt(s.ratePerS)} req/s`,
        f ? `forecast ${fmt(f.low)}–${fmt(f.high)} (q${f.lowQuantile}–q${f.highQuantile}, ${s.forecastModel || "?"})` : "no fresh forecast",
      ),
      tile("n", `${s.agreedN ?? 0} / ${(s.backends ?? []).length}`, `agreed n (max ${s.maxN ?? 0}) / list, share ${s.share ?? 0}`),
      tile("latency", `${fmt(s.p50Ms, 0)} / ${fmt(s.p99Ms, 0)} ms`, `p50 / p99 vs SLO ${fmt(slo, 0)} ms`, (s.p99Ms ?? 0) > slo && slo > 0),
      tile("sla", windows > 0 ? pct(s.slaCompliantWindows ?? 0, windows) : "–", `SLA compliance (SL_min ${sl} %, ${windows} windows)`),
      tile("requests", String(s.requests ?? 0), "requests since the console started"),
      tile(
        "violations",
        `${violations} · ${s.failed ?? 0}`,
        `over RT_max (${pct(violations, completed)}) · failed or dropped`,
        violations + (s.failed ?? 0) > 0,
      ),
    );
  const n = s.agreedN ?? 0;
  const chips = [];
  (s.backends ?? []).forEach((b, i) => {
    if (i === n) chips.push(el("span", { class: "prefix-end", title: `n = ${n}` }));
    chips.push(backendChip(b));
  });
  if (n >= (s.backends ?? []).length && n > 0) chips.push(el("span", { class: "prefix-end", title: `n = ${n}` }));
  card.querySelector("[data-testid=backends]").replaceChildren(...chips);
  const ft = card.querySelector("[data-testid=frontends]");
  const head = el("tr");
  head.append(el("th", {}, "frontend"), el("th", {}, "n"), el("th", {}, "n_F"), el("th", {}, "global rate estimate"));
  ft.replaceChildren(
    head,
    ...(s.frontends ?? []).map((fe) => {
      const tr = el("tr");
      tr.append(
        el("td", {}, fe.id),
        el("td", {}, String(fe.n ?? 0)),
        el("td", {}, String(fe.frontendsEstimate ?? 0)),
        el("td", {}, `${fmt(fe.globalRateEstimate)} req/s`),
      );
      return tr;
    }),
  );

  const data = appendPoints(`svc:${s.name}`, s.series ?? [], [
    (p) => p,
    (p) => p.ratePerS ?? 0,
    (p) => orNull(p.hasForecast, p.forecastLow),
    (p) => orNull(p.hasForecast, p.forecastMid),
    (p) => orNull(p.hasForecast, p.forecastHigh),
    (p) => orNull(p.hasLatency, p.p50Ms),
    (p) => orNull(p.hasLatency, p.p99Ms),
    () => slo,
    (p) => p.agreedN ?? 0,
    (p) => p.share ?? 0,
    (p) => (p.warm ?? 0) + (p.busy ?? 0),
    (p) => (p.provisioning ?? 0) + (p.cold ?? 0),
    (p) => p.missing ?? 0,
    (p) => p.violations ?? 0,
    (p) => p.drops ?? 0,
  ]);
  const [x, rate, lo, mid, hi, p50, p99, sloLine, agreed, share, warm, starting, missing, viol, drops] = data;
  const box = card.querySelector(".charts");
  chart(
    `rate:${s.name}`,
    box,
    "Arrival rate and forecast (req/s)",
    [
      { label: "observed", stroke: "#1d232a" },
      { label: "forecast low", stroke: "#93c5fd", dash: [4, 4] },
      { label: "forecast median", stroke: "#2563eb", dash: [6, 3] },
      { label: "forecast high", stroke: "#93c5fd", dash: [4, 4] },
    ],
    { bands: [{ series: [4, 2], fill: "rgba(37, 99, 235, 0.12)" }] },
  ).setData([x, rate, lo, mid, hi]);
  chart(`latency:${s.name}`, box, "Latency (ms) vs SLO", [
    { label: "p50", stroke: "#16a34a" },
    { label: "p99", stroke: "#2563eb" },
    { label: "SLO", stroke: "#dc2626", dash: [6, 4] },
  ]).setData([x, p50, p99, sloLine]);
  chart(`n:${s.name}`, box, "Backends", [
    { label: "agreed n", stroke: "#1d232a" },
    { label: "share", stroke: "#7c3aed", dash: [6, 3] },
    { label: "warm or busy", stroke: "#16a34a" },
    { label: "cold or provisioning", stroke: "#d97706" },
    { label: "missing", stroke: "#dc2626" },
  ]).setData([x, agreed, share, warm, starting, missing]);
  chart(`violations:${s.name}`, box, `Requests over RT_max and failed (per ${(lastSampleMs / 1000).toFixed(0)} s)`, [
    { label: "over RT_max", stroke: "#d97706" },
    { label: "failed or dropped", stroke: "#dc2626" },
  ]).setData([x, viol, drops]);
}

let lastSampleMs = 1000;
let seen = 0;

function render(u) {
  if (u.full) {
    series.clear();
    for (const c of charts.values()) c.destroy();
    charts.clear();
    $("services").replaceChildren();
    $("cluster-chart").replaceChildren();
  }
  lastSampleMs = u.sampleMs ?? 1000;
  $("seq").textContent = String(u.seq ?? 0);
  $("clock").textContent = new Date(u.atUnixMs ?? Date.now()).toLocaleTimeString();
  renderCluster(u);
  const names = new Set();
  for (const s of u.services ?? []) {
    names.add(s.name);
    renderService(s);
  }
  for (const card of document.querySelectorAll("[data-service]")) {
    const name = card.getAttribute("data-service");
    if (names.has(name)) continue;
    card.remove();
    // Its charts and points go with it: a service registered again gets a new card and new charts.
    series.delete(`svc:${name}`);
    for (const kind of ["rate", "latency", "n", "violations"]) {
      charts.get(`${kind}:${name}`)?.destroy();
      charts.delete(`${kind}:${name}`);
    }
  }
  seen++;
  document.body.dataset.updates = String(seen);
}

let retryMs = 1000;

function connect() {
  const source = new EventSource("/api/events");
  source.onopen = () => {
    retryMs = 1000;
    $("status").textContent = "live";
    $("status").className = "status live";
  };
  source.onmessage = (ev) => {
    try {
      const u = JSON.parse(ev.data);
      if (u.full && u.sampleMs) historyMs = Math.max(historyMs, ((u.cluster?.series ?? []).length + 1) * u.sampleMs);
      render(u);
    } catch (err) {
      console.error("bad update", err);
    }
  };
  source.onerror = () => {
    $("status").textContent = "reconnecting…";
    $("status").className = "status down";
    // An answer other than 200 (the console full, a proxy's 502 while it restarts) closes an EventSource for good:
    // the page connects again itself, backing off to 30 s.
    if (source.readyState === EventSource.CLOSED) {
      setTimeout(connect, retryMs);
      retryMs = Math.min(30_000, retryMs * 2);
    }
  };
}

connect();
