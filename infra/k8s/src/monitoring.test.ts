import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { parser } from "@prometheus-io/lezer-promql";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import { findKubectl, type K8sObject, k8sRoot, render, validate } from "./render.js";

/**
 * infra/k8s/monitoring against the code: every PromQL expression of the PrometheusRule and of the Grafana dashboard
 * parses with Prometheus' own grammar (@prometheus-io/lezer-promql), and names only metrics the services register
 * with prom-client (read from services/ and libs/ sources) and only labels those metrics carry; the burn-rate alerts
 * use the SRE workbook's window pairs; the kustomization wraps the dashboard for Grafana's sidecar and the PodMonitor
 * scrapes the pods the alerts name.
 */

const repoRoot = join(k8sRoot, "..", "..");
const monitoringDir = join(k8sRoot, "monitoring");
const dashboardFile = join(monitoringDir, "infergrid-dashboard.json");

// --- What the source exports ----------------------------------------------------------------------------------------

type MetricType = "counter" | "gauge" | "histogram" | "summary";
interface Registration {
  name: string;
  type: MetricType;
  labels: string[];
  at: string;
}

const METRIC_CLASSES: Record<string, MetricType> = { Counter: "counter", Gauge: "gauge", Histogram: "histogram", Summary: "summary" };

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith(".ts") && !e.name.endsWith(".test.ts") && !e.name.endsWith(".d.ts"))
    .map((e) => join(e.parentPath, e.name))
    .filter((f) => !/[/\\](node_modules|dist|gen)[/\\]/.test(relative(repoRoot, f)));
}

const stringValue = (node: ts.Node | undefined): string | undefined =>
  node && (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) ? node.text : undefined;

const property = (obj: ts.ObjectLiteralExpression, name: string) =>
  obj.properties.find((p): p is ts.PropertyAssignment => ts.isPropertyAssignment(p) && p.name.getText() === name);

/**
 * Every `new Counter|Gauge|Histogram|Summary({ name, labelNames })` of prom-client in the TypeScript sources under
 * services/ and libs/ (tests excluded), and the registries' default labels (`createMetricsRegistry({ ... })`).
 * A name or label list that is not a literal is a problem: the check could not see what it exports.
 */
function scanSources(files: readonly string[]): { registrations: Registration[]; defaultLabels: string[]; problems: string[] } {
  const registrations: Registration[] = [];
  const defaultLabels = new Set<string>();
  const problems: string[] = [];
  for (const file of files) {
    const text = readFileSync(file, "utf8");
    if (!text.includes("prom-client") && !text.includes("createMetricsRegistry(")) continue;
    const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
    // Local name -> prom-client's class name (`import { Counter as C }` included).
    const promClient = new Map<string, string>();
    for (const s of source.statements) {
      if (ts.isImportDeclaration(s) && stringValue(s.moduleSpecifier) === "prom-client") {
        const named = s.importClause?.namedBindings;
        if (named && ts.isNamedImports(named))
          for (const el of named.elements) promClient.set(el.name.text, (el.propertyName ?? el.name).getText());
        else if (named || s.importClause?.name)
          problems.push(`${relative(repoRoot, file)}: prom-client imported whole; name its classes instead`);
      }
    }
    const visit = (node: ts.Node): void => {
      const at = () => `${relative(repoRoot, file)}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1}`;
      if (ts.isNewExpression(node) && ts.isIdentifier(node.expression) && promClient.has(node.expression.text)) {
        const type = METRIC_CLASSES[promClient.get(node.expression.text)!];
        const arg = node.arguments?.[0];
        if (type) {
          if (!arg || !ts.isObjectLiteralExpression(arg)) problems.push(`${at()}: ${node.expression.text} without an object literal`);
          else {
            const name = stringValue(property(arg, "name")?.initializer);
            const labelNames = property(arg, "labelNames")?.initializer;
            const labels =
              labelNames === undefined
                ? []
                : ts.isArrayLiteralExpression(labelNames)
                  ? labelNames.elements.map((e) => stringValue(e))
                  : [undefined];
            if (name === undefined) problems.push(`${at()}: metric name is not a string literal`);
            else if (labels.some((l) => l === undefined)) problems.push(`${at()}: labelNames of ${name} are not string literals`);
            else registrations.push({ name, type, labels: labels as string[], at: at() });
          }
        }
      }
      if (ts.isCallExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === "createMetricsRegistry") {
        const arg = node.arguments[0];
        if (arg && ts.isObjectLiteralExpression(arg)) for (const p of arg.properties) if (p.name) defaultLabels.add(p.name.getText());
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return { registrations, defaultLabels: [...defaultLabels], problems };
}

/** Labels Prometheus adds to every series of a PodMonitor target (honorLabels keeps the exported ones on a clash). */
const TARGET_LABELS = ["job", "instance", "namespace", "pod", "container", "endpoint"];

/** Series name -> the labels it may carry, as Prometheus stores them (histograms as _bucket/_sum/_count). */
function seriesCatalog(registrations: readonly Registration[], defaultLabels: readonly string[]): Map<string, Set<string>> {
  const series = new Map<string, Set<string>>();
  const add = (name: string, labels: readonly string[]) => {
    const set = series.get(name) ?? new Set<string>();
    for (const l of [...labels, ...defaultLabels, ...TARGET_LABELS]) set.add(l);
    series.set(name, set);
  };
  for (const r of registrations) {
    if (r.type === "histogram") {
      add(`${r.name}_bucket`, [...r.labels, "le"]);
      add(`${r.name}_sum`, r.labels);
      add(`${r.name}_count`, r.labels);
    } else if (r.type === "summary") {
      add(r.name, [...r.labels, "quantile"]);
      add(`${r.name}_sum`, r.labels);
      add(`${r.name}_count`, r.labels);
    } else {
      add(r.name, r.labels);
    }
  }
  // Prometheus' own per-target series.
  series.set("up", new Set(TARGET_LABELS));
  return series;
}

// --- The PromQL checker ---------------------------------------------------------------------------------------------

type SyntaxNode = ReturnType<typeof parser.parse>["topNode"];
/** What an expression yields: a vector with these possible labels, a scalar, or a string. */
type Shape = Set<string> | "scalar" | "string";

interface ExprCheck {
  problems: string[];
  /** Series names selected. */
  metrics: string[];
  /** Labels the result may carry (undefined: not a vector). */
  labels: Set<string> | undefined;
  tree: SyntaxNode;
}

const EXPRESSIONS = new Set([
  "AggregateExpr",
  "BinaryExpr",
  "FunctionCall",
  "MatrixSelector",
  "NumberDurationLiteral",
  "OffsetExpr",
  "ParenExpr",
  "StringLiteral",
  "SubqueryExpr",
  "UnaryExpr",
  "VectorSelector",
  "StepInvariantExpr",
  "AnchoredExpr",
  "SmoothedExpr",
]);
/** Functions whose (first) argument is a range vector. */
const RANGE_FUNCTIONS = new Set([
  "rate",
  "irate",
  "increase",
  "delta",
  "idelta",
  "deriv",
  "changes",
  "resets",
  "predict_linear",
  "absent_over_time",
  "present_over_time",
  "avg_over_time",
  "min_over_time",
  "max_over_time",
  "sum_over_time",
  "count_over_time",
  "last_over_time",
  "quantile_over_time",
  "stddev_over_time",
  "stdvar_over_time",
]);
const RANGE_ARGUMENT_INDEX: Record<string, number> = { quantile_over_time: 1 };
const SET_OPERATORS = new Set(["and", "or", "unless"]);

const children = (node: SyntaxNode): SyntaxNode[] => {
  const out: SyntaxNode[] = [];
  for (let c = node.firstChild; c; c = c.nextSibling) out.push(c);
  return out;
};
const child = (node: SyntaxNode, name: string) => children(node).find((c) => c.type.name === name);
const expressions = (node: SyntaxNode) => children(node).filter((c) => EXPRESSIONS.has(c.type.name));
const unquote = (s: string) => JSON.parse(s.startsWith("'") ? `"${s.slice(1, -1).replace(/"/g, '\\"')}"` : s) as string;

/**
 * Parses `expr` with Prometheus' grammar and checks it against `known` (series name -> its labels): no syntax error,
 * every selected series exists, every matcher, by/without, on/ignoring and label_replace source label exists where
 * it is used, range functions get a range, one-to-one matches join equal label sets. Returns what it found.
 */
function checkExpr(expr: string, known: ReadonlyMap<string, ReadonlySet<string>>): ExprCheck {
  const tree = parser.parse(expr);
  const problems: string[] = [];
  const metrics: string[] = [];
  tree.iterate({
    enter: (n) => {
      if (n.type.isError) problems.push(`syntax error at ${n.from}: ${JSON.stringify(expr.slice(Math.max(0, n.from - 20), n.to + 20))}`);
    },
  });
  const text = (n: SyntaxNode) => expr.slice(n.from, n.to);
  const grouping = (n: SyntaxNode | undefined) =>
    n
      ? children(n).flatMap((c) => (c.type.name === "LabelName" ? [text(c)] : c.type.name === "QuotedLabelName" ? [unquote(text(c))] : []))
      : [];
  const need = (labels: Shape, label: string, where: string) => {
    if (typeof labels === "string") problems.push(`${where}: label ${label} on a ${labels}`);
    else if (!labels.has(label)) problems.push(`${where}: label ${label} is not on ${[...labels].sort().join(",") || "(no labels)"}`);
  };

  const shape = (node: SyntaxNode): Shape => {
    switch (node.type.name) {
      case "PromQL":
      case "ParenExpr":
      case "UnaryExpr":
      case "OffsetExpr":
      case "StepInvariantExpr":
      case "AnchoredExpr":
      case "SmoothedExpr":
      case "SubqueryExpr":
      case "MatrixSelector": {
        const inner = expressions(node)[0];
        return inner ? shape(inner) : "scalar";
      }
      case "NumberDurationLiteral":
        return "scalar";
      case "StringLiteral":
        return "string";
      case "VectorSelector":
        return selector(node);
      case "FunctionCall":
        return call(node);
      case "AggregateExpr":
        return aggregate(node);
      case "BinaryExpr":
        return binary(node);
      default:
        problems.push(`unexpected ${node.type.name} ${JSON.stringify(text(node))}`);
        return new Set();
    }
  };

  const selector = (node: SyntaxNode): Shape => {
    const id = child(node, "Identifier");
    if (!id) {
      problems.push(`selector without a metric name: ${text(node)}`);
      return new Set();
    }
    const name = text(id);
    metrics.push(name);
    const found = known.get(name);
    if (!found) {
      problems.push(`metric ${name} is not exported (no registration in services/ or libs/, no recording rule)`);
      return new Set();
    }
    const labels = new Set(found);
    for (const m of children(child(node, "LabelMatchers") ?? node).filter((c) => c.type.name === "UnquotedLabelMatcher")) {
      const label = text(child(m, "LabelName")!);
      if (label !== "__name__") need(labels, label, name);
    }
    return labels;
  };

  const call = (node: SyntaxNode): Shape => {
    const fn = text(child(node, "FunctionIdentifier")!);
    const args = expressions(child(node, "FunctionCallBody")!);
    const shapes = args.map(shape);
    const rangeAt = RANGE_FUNCTIONS.has(fn) ? (RANGE_ARGUMENT_INDEX[fn] ?? 0) : -1;
    if (rangeAt >= 0 && !["MatrixSelector", "SubqueryExpr"].includes(args[rangeAt]?.type.name ?? ""))
      problems.push(`${fn}() needs a range vector`);
    const vector = (i: number) => {
      const s = shapes[i];
      if (s instanceof Set) return new Set(s);
      problems.push(`${fn}(): argument ${i + 1} is not a vector`);
      return new Set<string>();
    };
    switch (fn) {
      case "time":
      case "pi":
      case "scalar":
        return "scalar";
      case "vector":
        return new Set();
      case "histogram_quantile": {
        const labels = vector(1);
        need(labels, "le", "histogram_quantile");
        labels.delete("le");
        return labels;
      }
      case "label_replace": {
        const labels = vector(0);
        const [dst, , src] = args.slice(1, 4).map((a) => unquote(text(a)));
        if (src) need(labels, src, "label_replace source");
        if (dst) labels.add(dst);
        return labels;
      }
      case "absent":
      case "absent_over_time": {
        // The labels of its equality matchers, when the argument is a selector.
        let sel: SyntaxNode | undefined = args[0];
        if (sel?.type.name === "MatrixSelector") sel = expressions(sel)[0];
        if (sel?.type.name !== "VectorSelector") return new Set();
        return new Set(
          children(child(sel, "LabelMatchers") ?? sel)
            .filter((m) => m.type.name === "UnquotedLabelMatcher" && child(child(m, "MatchOp")!, "EqlSingle"))
            .map((m) => text(child(m, "LabelName")!)),
        );
      }
      default: {
        const first = shapes.findIndex((s) => s instanceof Set);
        return first >= 0 ? vector(first) : "scalar";
      }
    }
  };

  const aggregate = (node: SyntaxNode): Shape => {
    const op = text(child(node, "AggregateOp")!);
    const modifier = child(node, "AggregateModifier");
    const args = expressions(child(node, "FunctionCallBody")!);
    const shapes = args.map(shape);
    const inner = shapes[shapes.length - 1];
    if (!(inner instanceof Set)) {
      problems.push(`${op}: aggregates no vector`);
      return new Set();
    }
    const labels = grouping(modifier && child(modifier, "GroupingLabels"));
    for (const l of labels) need(inner, l, `${op} ${modifier ? text(modifier) : ""}`);
    if (["topk", "bottomk", "limitk", "limit_ratio"].includes(op)) return new Set(inner);
    if (!modifier) return new Set();
    if (child(modifier, "Without")) return new Set([...inner].filter((l) => !labels.includes(l)));
    return new Set(labels);
  };

  const binary = (node: SyntaxNode): Shape => {
    const [lhs, rhs] = expressions(node);
    const left = shape(lhs!);
    const right = shape(rhs!);
    const op = children(node).find(
      (c) => !EXPRESSIONS.has(c.type.name) && !["BoolModifier", "MatchingModifierClause"].includes(c.type.name),
    );
    const opText = op ? text(op).toLowerCase() : "?";
    if (!(left instanceof Set)) return right instanceof Set ? right : "scalar";
    if (!(right instanceof Set)) return left;
    const matching = child(node, "MatchingModifierClause");
    const groupingLists = matching ? children(matching).filter((c) => c.type.name === "GroupingLabels") : [];
    const matchLabels = grouping(groupingLists[0]);
    const include = grouping(groupingLists[1]);
    if (matching && child(matching, "On")) {
      for (const l of matchLabels) {
        need(left, l, `left of ${opText} on(...)`);
        need(right, l, `right of ${opText} on(...)`);
      }
    } else if (matching && child(matching, "Ignoring")) {
      for (const l of matchLabels) if (!left.has(l) && !right.has(l)) problems.push(`ignoring(${l}): on neither side of ${opText}`);
    } else if (opText !== "or") {
      // Matching on every label: both sides must be able to carry the same ones.
      const a = [...left].sort().join(",");
      const b = [...right].sort().join(",");
      if (a !== b) problems.push(`${opText} matches {${a}} with {${b}}: add on(...) or aggregate`);
    }
    if (opText === "or") return new Set([...left, ...right]);
    if (SET_OPERATORS.has(opText)) return left;
    if (matching && child(matching, "GroupRight")) {
      for (const l of include) need(left, l, "group_right(...)");
      return new Set([...right, ...include]);
    }
    for (const l of include) need(right, l, "group_left(...)");
    return new Set([...left, ...include]);
  };

  const result = problems.length === 0 ? shape(tree.topNode) : undefined;
  return { problems, metrics, labels: result instanceof Set ? result : undefined, tree: tree.topNode };
}

// --- The files ------------------------------------------------------------------------------------------------------

interface RuleDoc {
  record?: string;
  alert?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
interface PrometheusRuleDoc extends K8sObject {
  spec: { groups: { name: string; interval?: string; rules: RuleDoc[] }[] };
}
interface Target {
  expr: string;
  refId: string;
  datasource?: { uid?: string };
}
interface Panel {
  id: number;
  type: string;
  title: string;
  description?: string;
  datasource?: { type?: string; uid?: string };
  gridPos: { h: number; w: number; x: number; y: number };
  targets?: Target[];
  panels?: Panel[];
}
interface Variable {
  name: string;
  type: string;
  query: string | { query: string };
  datasource?: { uid?: string };
}
interface Dashboard {
  uid: string;
  title: string;
  schemaVersion: number;
  templating: { list: Variable[] };
  panels: Panel[];
}

const readYaml = <T>(name: string) => parse(readFileSync(join(monitoringDir, name), "utf8")) as T;
const rulesDoc = readYaml<PrometheusRuleDoc>("alerts.yaml");
const rules = rulesDoc.spec.groups.flatMap((g) => g.rules);
const dashboardText = readFileSync(dashboardFile, "utf8");
const dashboard = JSON.parse(dashboardText) as Dashboard;
const allPanels = (ps: readonly Panel[]): Panel[] => ps.flatMap((p) => [p, ...allPanels(p.panels ?? [])]);
const panels = allPanels(dashboard.panels);

// biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's variable syntax, not a JavaScript template.
const DATASOURCE = "${datasource}";
/** Grafana's built-in interval variables, as PromQL durations (template variables stay inside label values). */
const grafanaToPromql = (expr: string) => expr.replace(/\$__rate_interval|\$__interval|\$__range/g, "5m");

const scanned = scanSources(
  ["services", "libs"].flatMap((top) =>
    readdirSync(join(repoRoot, top))
      .map((pkg) => join(repoRoot, top, pkg, "src"))
      .filter((src) => existsSync(src))
      .flatMap(sourceFiles),
  ),
);
const exported = seriesCatalog(scanned.registrations, scanned.defaultLabels);

/** The catalog plus what the rules record, each with the labels its expression yields (rules in file order). */
function withRecordingRules(): { known: Map<string, Set<string>>; problems: string[] } {
  const known = new Map([...exported].map(([k, v]) => [k, new Set(v)]));
  const problems: string[] = [];
  for (const r of rules) {
    if (!r.record) continue;
    const checked = checkExpr(r.expr, known);
    problems.push(...checked.problems.map((p) => `record ${r.record}: ${p}`));
    const labels = known.get(r.record) ?? new Set<string>();
    for (const l of [...(checked.labels ?? []), ...Object.keys(r.labels ?? {})]) labels.add(l);
    known.set(r.record, labels);
  }
  return { known, problems };
}
const recorded = withRecordingRules();
const known = recorded.known;

const durationSeconds = (d: string) => {
  const units: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400, w: 604800 };
  const m = /^(\d+)([smhdw])$/.exec(d);
  if (!m) throw new Error(`not a duration: ${d}`);
  return Number(m[1]) * units[m[2]!]!;
};

describe("infra/k8s/monitoring: the metrics the source exports", () => {
  it("finds every prom-client registration as literals, and the registries' default label", () => {
    expect(scanned.problems).toEqual([]);
    expect(scanned.defaultLabels).toEqual(["service"]);
    const byName = Object.fromEntries(scanned.registrations.map((r) => [r.name, r]));
    // A few the dashboard and the alerts stand on, with their types and labels as the services declare them.
    expect(byName.infergrid_frontend_requests_total).toMatchObject({ type: "counter", labels: ["service", "code"] });
    expect(byName.infergrid_frontend_request_duration_seconds).toMatchObject({ type: "histogram", labels: ["service"] });
    expect(byName.infergrid_frontend_requests_within_slo_total).toMatchObject({ type: "counter", labels: ["service"] });
    expect(byName.infergrid_frontend_slo_objective_ratio).toMatchObject({ type: "gauge", labels: ["service"] });
    expect(byName.infergrid_frontend_slo_latency_seconds).toMatchObject({ type: "gauge", labels: ["service"] });
    expect(byName.infergrid_allocator_reconcile_seconds).toMatchObject({ type: "histogram", labels: [] });
    expect(byName.infergrid_allocator_pool_backends).toMatchObject({ type: "gauge" });
    expect(scanned.registrations.length).toBeGreaterThanOrEqual(30);
    // One type per name, wherever it is registered.
    for (const r of scanned.registrations) expect(byName[r.name]?.type, r.at).toBe(r.type);
  });

  it("maps histograms to their _bucket (with le), _sum and _count series and nothing else", () => {
    expect(exported.get("infergrid_frontend_request_duration_seconds_bucket")).toEqual(new Set(["service", "le", ...TARGET_LABELS]));
    expect(exported.has("infergrid_frontend_request_duration_seconds_count")).toBe(true);
    expect(exported.has("infergrid_frontend_request_duration_seconds")).toBe(false);
    expect(exported.get("infergrid_frontend_requests_total")).toEqual(new Set(["service", "code", ...TARGET_LABELS]));
  });
});

describe("infra/k8s/monitoring: the PromQL checker", () => {
  const problems = (expr: string) => checkExpr(expr, known).problems;

  it("accepts a query on exported metrics and labels", () => {
    expect(problems('sum by (service, le) (rate(infergrid_frontend_request_duration_seconds_bucket{service="a"}[5m]))')).toEqual([]);
  });

  it("reports an invented metric as missing", () => {
    expect(problems("sum(rate(infergrid_frontend_requests_invented_total[5m]))")).toEqual([
      "metric infergrid_frontend_requests_invented_total is not exported (no registration in services/ or libs/, no recording rule)",
    ]);
    // A histogram has no series under its bare name.
    expect(problems("infergrid_allocator_reconcile_seconds")).toHaveLength(1);
    // An invented recording rule is missing too.
    expect(problems("infergrid:slo_invented:ratio_rate5m")).toHaveLength(1);
  });

  it("reports labels the metric does not carry, in matchers, by(), on() and label_replace()", () => {
    expect(problems('infergrid_allocator_pool_backends{code="OK"}')).toEqual([
      expect.stringContaining("infergrid_allocator_pool_backends: label code is not on"),
    ]);
    expect(problems("sum by (protocol) (infergrid_frontend_backends_in_use)")).toHaveLength(1);
    expect(problems("histogram_quantile(0.99, sum by (service) (rate(infergrid_frontend_request_duration_seconds_bucket[5m])))")).toEqual([
      expect.stringContaining("label le is not on"),
    ]);
    expect(
      problems(
        "sum by (service) (infergrid_frontend_backends_in_use) / on (code) sum by (service) (infergrid_frontend_frontends_estimate)",
      ),
    ).toHaveLength(2);
    expect(problems('label_replace(infergrid_allocator_free_backends, "x", "$1", "what", "(.*)")')).toHaveLength(1);
  });

  it("reports syntax errors, a rate without a range, and one-to-one matches that can never match", () => {
    expect(problems("sum(rate(infergrid_frontend_requests_total[5m])")).not.toEqual([]);
    expect(problems("sum by (service) (infergrid_frontend_backends_in_use) $service")).not.toEqual([]);
    expect(problems("rate(infergrid_frontend_requests_total)")).toEqual(["rate() needs a range vector"]);
    expect(problems("sum by (service) (infergrid_frontend_backends_in_use) - sum(infergrid_frontend_frontends_estimate)")).toHaveLength(1);
  });
});

describe("infra/k8s/monitoring/alerts.yaml", () => {
  it("is a PrometheusRule valid against the Prometheus Operator's schema", () => {
    expect(rulesDoc).toMatchObject({ apiVersion: "monitoring.coreos.com/v1", kind: "PrometheusRule" });
    expect(validate([rulesDoc])).toEqual([]);
    const names = rulesDoc.spec.groups.map((g) => g.name);
    expect(new Set(names).size).toBe(names.length);
    // The schema check is not a no-op.
    expect(validate([{ ...rulesDoc, spec: { groups: [{ name: "x", rules: [{ alert: "A" }] }] } } as K8sObject])).not.toEqual([]);
  });

  it("parses every expression and names only exported metrics and labels (recorded metrics defined before use)", () => {
    expect(recorded.problems).toEqual([]);
    for (const r of rules.filter((x) => x.alert)) expect(checkExpr(r.expr, known).problems, r.alert).toEqual([]);
    // Every recording rule's window is the one its name says: ...:rate5m reads [5m] and the 5m series.
    for (const r of rules.filter((x) => x.record?.match(/rate(\d+[smhd])$/))) {
      const window = r.record!.match(/rate(\d+[smhd])$/)![1];
      for (const range of r.expr.matchAll(/\[(\w+)\]/g)) expect(range[1], r.record).toBe(window);
      for (const ref of r.expr.matchAll(/infergrid:\w+:\w*rate(\d+[smhd])\b/g)) expect(ref[1], r.record).toBe(window);
    }
  });

  it("gives every alert an expr, a for, a severity, a summary, and annotations that name only labels the alert has", () => {
    const alerts = rules.filter((r) => r.alert);
    expect(alerts.length).toBeGreaterThanOrEqual(8);
    for (const a of alerts) {
      expect(a.expr, a.alert).toBeTruthy();
      expect(durationSeconds(a.for ?? ""), a.alert).toBeGreaterThan(0);
      expect(["critical", "warning"], a.alert).toContain(a.labels?.severity);
      expect(a.annotations?.summary, a.alert).toBeTruthy();
      const labels = new Set([...(checkExpr(a.expr, known).labels ?? []), ...Object.keys(a.labels ?? {})]);
      for (const text of Object.values(a.annotations ?? {}))
        for (const m of text.matchAll(/\$labels\.(\w+)/g))
          expect(labels.has(m[1]!), `${a.alert} annotation uses $labels.${m[1]}`).toBe(true);
    }
    for (const r of rules.filter((x) => x.record)) expect(r.record).toMatch(/^infergrid:\w+:\w+$/);
  });

  it("has the SRE workbook's multi-window burn-rate pairs: page at 14.4x (1h, 5m) and 6x (6h, 30m), ticket at 3x (1d, 2h) and 1x (3d, 6h)", () => {
    const burns = rules.filter((r) => r.alert === "InferGridSLOErrorBudgetBurn");
    const found = burns.map((r) => {
      // expr: <burn rate over long> > F and <burn rate over short> > F
      const checked = checkExpr(r.expr, known);
      const top = expressions(checked.tree)[0]!;
      expect(top.type.name).toBe("BinaryExpr");
      expect(child(top, "And"), r.expr).toBeDefined();
      const sides = expressions(top).map((side) => {
        const text = r.expr.slice(side.from, side.to);
        const m = /^infergrid:slo_burn_rate:rate(\w+) > ([\d.]+)$/.exec(text.trim());
        expect(m, text).not.toBeNull();
        return { window: m![1]!, factor: Number(m![2]) };
      });
      expect(sides[0]!.factor).toBe(sides[1]!.factor);
      const [long, short] = sides.map((s) => s.window);
      // The short window is a twelfth of the long one; the labels say which pair fired.
      expect(durationSeconds(long!)).toBe(12 * durationSeconds(short!));
      expect(r.labels).toMatchObject({ long_window: long, short_window: short });
      return [long, short, sides[0]!.factor, r.labels?.severity];
    });
    expect(found).toEqual([
      ["1h", "5m", 14.4, "critical"],
      ["6h", "30m", 6, "critical"],
      ["1d", "2h", 3, "warning"],
      ["3d", "6h", 1, "warning"],
    ]);
  });

  it("counts the SLI from the frontends' within-SLO counter, against each service's exported objective, with no defaults", () => {
    const rule = (name: string) => rules.find((r) => r.record === name)!;
    expect(rule("infergrid:slo_objective:ratio").expr.trim()).toBe("max by (namespace, service) (infergrid_frontend_slo_objective_ratio)");
    // The requests counted are the ones the frontend's SLA accounting counts: its client errors left out, no others.
    const frontend = readFileSync(join(repoRoot, "services/frontend/src/frontend.ts"), "utf8");
    const clientErrors = /const CLIENT_ERRORS = new Set\(\[([^\]]*)\]\)/.exec(frontend)![1]!.match(/grpc\.status\.(\w+)/g)!;
    const windows = ["5m", "30m", "1h", "2h", "6h", "1d", "3d"];
    for (const w of windows) {
      const requests = rule(`infergrid:slo_requests:rate${w}`).expr;
      expect(requests).toContain("infergrid_frontend_requests_total{");
      expect(/code!~"([^"]+)"/.exec(requests)![1]!.split("|").sort()).toEqual(
        clientErrors.map((c) => c.slice("grpc.status.".length)).sort(),
      );
      expect(checkExpr(rule(`infergrid:slo_requests_good:rate${w}`).expr, known).metrics).toEqual([
        "infergrid_frontend_requests_within_slo_total",
      ]);
      // A service without a single OK answer within RT_max has no good series: its error ratio is 1, not absent.
      expect(rule(`infergrid:slo_errors:ratio_rate${w}`).expr).toContain(`or on (namespace, service) 0 * infergrid:slo_requests:rate${w}`);
      expect(rule(`infergrid:slo_burn_rate:rate${w}`).expr.trim()).toBe(
        `infergrid:slo_errors:ratio_rate${w} / on (namespace, service) (1 - infergrid:slo_objective:ratio)`,
      );
    }
    // No threshold bucket, no default objective, no per-service numbers.
    for (const r of rules) {
      expect(r.expr, r.record ?? r.alert).not.toContain("request_duration_seconds_bucket");
      expect(r.record ?? "", r.expr).not.toMatch(/override|threshold/);
      if (r.record) expect(r.expr.match(/\b0\.\d+\b/g) ?? [], r.record).toEqual([]);
    }
  });

  it("says when a service answering requests has no objective to burn against", () => {
    const missing = rules.find((r) => r.alert === "InferGridSLOObjectiveMissing")!;
    expect(checkExpr(missing.expr, known).metrics).toEqual(["infergrid:slo_requests:rate5m", "infergrid:slo_objective:ratio"]);
    expect(durationSeconds(missing.for!)).toBeGreaterThan(durationSeconds("5m"));
  });

  it("alerts when no frontend or no allocator is scraped, and when the allocator's plan goes stale", () => {
    const alert = (name: string) => rules.find((r) => r.alert === name)?.expr ?? "";
    expect(alert("InferGridFrontendMissing")).toContain('absent(up{job="frontend"})');
    expect(alert("InferGridAllocatorMissing")).toContain('absent(up{job="global-allocator"})');
    expect(checkExpr(alert("InferGridAllocatorPlanStale"), known).metrics).toEqual(["infergrid_allocator_reconcile_seconds_count"]);
  });
});

describe("infra/k8s/monitoring/infergrid-dashboard.json", () => {
  const targets = panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, ...t })));

  it("is a Grafana dashboard (schema 39) on a datasource variable, with namespace and service variables from label_values", () => {
    expect(dashboard.schemaVersion).toBe(39);
    expect(dashboard.uid).toMatch(/^[a-z0-9-]{1,40}$/);
    const vars = Object.fromEntries(dashboard.templating.list.map((v) => [v.name, v]));
    expect(vars.datasource).toMatchObject({ type: "datasource", query: "prometheus" });
    for (const name of ["namespace", "service"]) {
      expect(vars[name]?.type).toBe("query");
      expect(vars[name]?.datasource?.uid).toBe(DATASOURCE);
    }
    const ids = panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const p of panels.filter((x) => x.type !== "row")) {
      expect(p.datasource?.uid, p.title).toBe(DATASOURCE);
      expect(p.targets?.length, p.title).toBeGreaterThan(0);
      expect(p.gridPos.x + p.gridPos.w, p.title).toBeLessThanOrEqual(24);
      for (const t of p.targets ?? []) expect(t.datasource?.uid, p.title).toBe(DATASOURCE);
    }
  });

  it("parses every panel query and names only exported metrics and labels", () => {
    expect(targets.length).toBeGreaterThanOrEqual(30);
    for (const t of targets) expect(checkExpr(grafanaToPromql(t.expr), known).problems, `${t.panel}: ${t.expr}`).toEqual([]);
  });

  it("reads its variables' label_values from exported metrics and labels", () => {
    for (const v of dashboard.templating.list.filter((x) => x.type === "query")) {
      const query = typeof v.query === "string" ? v.query : v.query.query;
      const m = /^label_values\((.+),\s*(\w+)\)$/.exec(query);
      expect(m, query).not.toBeNull();
      const checked = checkExpr(grafanaToPromql(m![1]!), known);
      expect(checked.problems, query).toEqual([]);
      expect(checked.labels?.has(m![2]!), query).toBe(true);
    }
  });

  it("covers per-service rate, latency, n, SLO and failures, and the pool, allocator and predictor", () => {
    const used = new Set(targets.flatMap((t) => checkExpr(grafanaToPromql(t.expr), known).metrics));
    for (const m of [
      "infergrid_frontend_requests_total",
      "infergrid_frontend_request_duration_seconds_bucket",
      "infergrid_frontend_backends_in_use",
      "infergrid_frontend_frontends_estimate",
      "infergrid_frontend_sla_compliance_ratio",
      "infergrid:slo_errors:ratio_rate5m",
      "infergrid:slo_objective:ratio",
      "infergrid:slo_burn_rate:rate1h",
      "infergrid_frontend_slo_latency_seconds",
      "infergrid_broker_requests_total",
      "infergrid_broker_failovers_total",
      "infergrid_backend_requests_total",
      "infergrid_allocator_pool_backends",
      "infergrid_allocator_free_backends",
      "infergrid_allocator_loaned_backends",
      "infergrid_allocator_service_list_length",
      "infergrid_allocator_reconcile_seconds_bucket",
      "infergrid_predictor_observed_rate_per_second",
      "infergrid_predictor_forecasts_total",
    ])
      expect(used.has(m), m).toBe(true);
    // The latency panel draws each service's RT_max as the frontends export it.
    const latency = panels.find((p) => p.targets?.some((t) => t.expr.includes("histogram_quantile(0.99, sum by (service, le)")))!;
    const threshold = latency.targets!.find((t) => t.expr.includes("infergrid_frontend_slo_latency_seconds"));
    expect(checkExpr(grafanaToPromql(threshold!.expr), known).labels).toEqual(new Set(["service"]));
  });
});

/** promtool (env PROMTOOL, else .tools/promtool as infra/scripts/setup.sh fetches it, else the PATH), or undefined. */
function findPromtool(): string | undefined {
  if (process.env.PROMTOOL) return process.env.PROMTOOL;
  const fetched = fileURLToPath(new URL("../../../.tools/promtool", import.meta.url));
  if (existsSync(fetched)) return fetched;
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    const candidate = join(dir, "promtool");
    if (dir && existsSync(candidate)) return candidate;
  }
  return undefined;
}

/** Prometheus' own unit tests of the rules (`promtool test rules`), on rules.yaml = alerts.yaml's groups. */
const PROMTOOL_TESTS = `rule_files: [rules.yaml]
evaluation_interval: 1m
tests:
  # a: 20% of its answers not within its RT_max (client errors not counted), objective 99%; b: 0.05% missed against
  # 99.9%, its two frontends exporting different objectives (the stricter counts); c: nothing but failures, so no
  # within-SLO series at all; x: answers, but no frontend exports its objective.
  - interval: 1m
    input_series:
      - series: 'infergrid_frontend_requests_total{namespace="ns",pod="f1",service="a",code="OK"}'
        values: '0+100x30'
      - series: 'infergrid_frontend_requests_total{namespace="ns",pod="f1",service="a",code="INVALID_ARGUMENT"}'
        values: '0+50x30'
      - series: 'infergrid_frontend_requests_within_slo_total{namespace="ns",pod="f1",service="a"}'
        values: '0+80x30'
      - series: 'infergrid_frontend_slo_objective_ratio{namespace="ns",pod="f1",service="a"}'
        values: '0.99x30'
      - series: 'infergrid_frontend_requests_total{namespace="ns",pod="f1",service="b",code="OK"}'
        values: '0+1000x30'
      - series: 'infergrid_frontend_requests_within_slo_total{namespace="ns",pod="f1",service="b"}'
        values: '0+999x30'
      - series: 'infergrid_frontend_requests_total{namespace="ns",pod="f2",service="b",code="OK"}'
        values: '0+1000x30'
      - series: 'infergrid_frontend_requests_within_slo_total{namespace="ns",pod="f2",service="b"}'
        values: '0+1000x30'
      - series: 'infergrid_frontend_slo_objective_ratio{namespace="ns",pod="f1",service="b"}'
        values: '0.999x30'
      - series: 'infergrid_frontend_slo_objective_ratio{namespace="ns",pod="f2",service="b"}'
        values: '0.99x30'
      - series: 'infergrid_frontend_requests_total{namespace="ns",pod="f1",service="c",code="UNAVAILABLE"}'
        values: '0+10x30'
      - series: 'infergrid_frontend_slo_objective_ratio{namespace="ns",pod="f1",service="c"}'
        values: '0.99x30'
      - series: 'infergrid_frontend_requests_total{namespace="ns",pod="f1",service="x",code="OK"}'
        values: '0+10x30'
      - series: 'infergrid_frontend_requests_within_slo_total{namespace="ns",pod="f1",service="x"}'
        values: '0+10x30'
      - series: 'up{namespace="ns",pod="f1",job="frontend"}'
        values: '1x30'
      - series: 'up{namespace="ns",pod="f2",job="frontend"}'
        values: '1x30'
    promql_expr_test:
      - expr: infergrid:slo_objective:ratio
        eval_time: 10m
        exp_samples:
          - labels: 'infergrid:slo_objective:ratio{namespace="ns",service="a"}'
            value: 0.99
          - labels: 'infergrid:slo_objective:ratio{namespace="ns",service="b"}'
            value: 0.999
          - labels: 'infergrid:slo_objective:ratio{namespace="ns",service="c"}'
            value: 0.99
      - expr: round(infergrid:slo_errors:ratio_rate5m, 0.0001)
        eval_time: 10m
        exp_samples:
          - labels: '{namespace="ns",service="a"}'
            value: 0.2
          - labels: '{namespace="ns",service="b"}'
            value: 0.0005
          - labels: '{namespace="ns",service="c"}'
            value: 1
          - labels: '{namespace="ns",service="x"}'
            value: 0
      - expr: round(infergrid:slo_burn_rate:rate1h, 0.01)
        eval_time: 10m
        exp_samples:
          - labels: '{namespace="ns",service="a"}'
            value: 20
          - labels: '{namespace="ns",service="b"}'
            value: 0.5
          - labels: '{namespace="ns",service="c"}'
            value: 100
      - expr: count by (alertname, service, long_window) (ALERTS{alertstate="firing"})
        eval_time: 10m
        exp_samples:
          - labels: '{alertname="InferGridSLOErrorBudgetBurn",service="a",long_window="1h"}'
            value: 1
          - labels: '{alertname="InferGridSLOErrorBudgetBurn",service="c",long_window="1h"}'
            value: 1
          - labels: '{alertname="InferGridAllocatorMissing"}'
            value: 1
      - expr: count by (alertname, service) (ALERTS{alertname="InferGridSLOObjectiveMissing", alertstate="firing"})
        eval_time: 20m
        exp_samples:
          - labels: '{alertname="InferGridSLOObjectiveMissing",service="x"}'
            value: 1
  # Slower burns: d misses 5% (5x a 99% budget: the two tickets), e 10% (10x: the 6x page too, not the 14.4x one).
  - interval: 5m
    input_series:
      - series: 'infergrid_frontend_requests_total{namespace="ns",pod="f1",service="d",code="OK"}'
        values: '0+1000x60'
      - series: 'infergrid_frontend_requests_within_slo_total{namespace="ns",pod="f1",service="d"}'
        values: '0+950x60'
      - series: 'infergrid_frontend_slo_objective_ratio{namespace="ns",pod="f1",service="d"}'
        values: '0.99x60'
      - series: 'infergrid_frontend_requests_total{namespace="ns",pod="f1",service="e",code="OK"}'
        values: '0+1000x60'
      - series: 'infergrid_frontend_requests_within_slo_total{namespace="ns",pod="f1",service="e"}'
        values: '0+900x60'
      - series: 'infergrid_frontend_slo_objective_ratio{namespace="ns",pod="f1",service="e"}'
        values: '0.99x60'
      - series: 'up{namespace="ns",pod="f1",job="frontend"}'
        values: '1x60'
      - series: 'up{namespace="ns",pod="g1",job="global-allocator"}'
        values: '1x60'
      # Control steps that mostly take over a second.
      - series: 'infergrid_allocator_reconcile_seconds_count{namespace="ns",pod="g1",job="global-allocator",service="global-allocator"}'
        values: '0+150x60'
      - series: 'infergrid_allocator_reconcile_seconds_bucket{namespace="ns",pod="g1",job="global-allocator",service="global-allocator",le="1"}'
        values: '0+15x60'
      - series: 'infergrid_allocator_reconcile_seconds_bucket{namespace="ns",pod="g1",job="global-allocator",service="global-allocator",le="5"}'
        values: '0+150x60'
      - series: 'infergrid_allocator_reconcile_seconds_bucket{namespace="ns",pod="g1",job="global-allocator",service="global-allocator",le="+Inf"}'
        values: '0+150x60'
    promql_expr_test:
      - expr: count by (alertname, service, long_window) (ALERTS{alertstate="firing"})
        eval_time: 4h
        exp_samples:
          - labels: '{alertname="InferGridSLOErrorBudgetBurn",service="d",long_window="1d"}'
            value: 1
          - labels: '{alertname="InferGridSLOErrorBudgetBurn",service="d",long_window="3d"}'
            value: 1
          - labels: '{alertname="InferGridSLOErrorBudgetBurn",service="e",long_window="6h"}'
            value: 1
          - labels: '{alertname="InferGridSLOErrorBudgetBurn",service="e",long_window="1d"}'
            value: 1
          - labels: '{alertname="InferGridSLOErrorBudgetBurn",service="e",long_window="3d"}'
            value: 1
          - labels: '{alertname="InferGridAllocatorSlowControlStep"}'
            value: 1
  # Frontends scraped but all failing; the allocator up, stepping for 5 minutes and then never again, slowly.
  - interval: 1m
    input_series:
      - series: 'up{namespace="ns",pod="f1",job="frontend"}'
        values: '0x30'
      - series: 'up{namespace="ns",pod="g1",job="global-allocator"}'
        values: '1x30'
      - series: 'infergrid_allocator_reconcile_seconds_count{namespace="ns",pod="g1",job="global-allocator",service="global-allocator"}'
        values: '0+30x5 150x25'
      - series: 'infergrid_allocator_reconcile_seconds_bucket{namespace="ns",pod="g1",job="global-allocator",service="global-allocator",le="1"}'
        values: '0+3x5 15x25'
      - series: 'infergrid_allocator_reconcile_seconds_bucket{namespace="ns",pod="g1",job="global-allocator",service="global-allocator",le="+Inf"}'
        values: '0+30x5 150x25'
    promql_expr_test:
      - expr: count by (alertname, namespace, job) (ALERTS{alertstate="firing"})
        eval_time: 8m
        exp_samples:
          - labels: '{alertname="InferGridFrontendMissing",namespace="ns"}'
            value: 1
          - labels: '{alertname="InferGridTargetDown",namespace="ns",job="frontend"}'
            value: 1
      - expr: count by (alertname, namespace, job) (ALERTS{alertstate="firing"})
        eval_time: 16m
        exp_samples:
          - labels: '{alertname="InferGridFrontendMissing",namespace="ns"}'
            value: 1
          - labels: '{alertname="InferGridTargetDown",namespace="ns",job="frontend"}'
            value: 1
          - labels: '{alertname="InferGridAllocatorPlanStale",namespace="ns",job="global-allocator"}'
            value: 1
`;

const promtool = findPromtool();

describe("promtool", () => {
  it("is there to evaluate the rules (infra/scripts/setup.sh fetches it into .tools/; INFERGRID_NO_PROMTOOL=1 skips on purpose)", () => {
    if (process.env.INFERGRID_NO_PROMTOOL === "1") return;
    expect(promtool, "promtool: run infra/scripts/setup.sh, or set PROMTOOL=<path>").toBeDefined();
  });
});

describe.skipIf(!promtool)("infra/k8s/monitoring/alerts.yaml evaluated by promtool", () => {
  it("records the SLI and burn rates per service and fires each alert when it should, and only then", () => {
    const dir = mkdtempSync(join(tmpdir(), "infergrid-rules-"));
    try {
      writeFileSync(join(dir, "rules.yaml"), stringify({ groups: rulesDoc.spec.groups }));
      writeFileSync(join(dir, "tests.yaml"), PROMTOOL_TESTS);
      const run = (...args: string[]) => {
        try {
          return execFileSync(promtool!, args, { cwd: dir, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
        } catch (err) {
          const e = err as { stdout?: string; stderr?: string };
          throw new Error(`promtool ${args.join(" ")} failed:\n${e.stdout ?? ""}${e.stderr ?? ""}`);
        }
      };
      expect(run("check", "rules", "rules.yaml")).toContain("SUCCESS");
      expect(run("test", "rules", "tests.yaml")).toContain("SUCCESS");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

const kubectl = findKubectl();
describe.skipIf(!kubectl)("infra/k8s/monitoring rendered with kustomize", () => {
  const monitoring = kubectl ? render("monitoring", kubectl) : [];
  const production = kubectl ? render("overlays/production", kubectl) : [];

  it("wraps the dashboard JSON, byte for byte, in a ConfigMap for Grafana's sidecar", () => {
    const cm = monitoring.find((o) => o.kind === "ConfigMap") as K8sObject & { data: Record<string, string> };
    expect(cm.metadata.name).toBe("infergrid-grafana-dashboard");
    expect(cm.metadata.labels?.grafana_dashboard).toBe("1");
    expect(cm.data["infergrid-dashboard.json"]).toBe(dashboardText);
    expect(monitoring.map((o) => o.kind).sort()).toEqual(["ConfigMap", "PodMonitor", "PrometheusRule"]);
    expect(validate(monitoring)).toEqual([]);
  });

  it("is part of the production overlay, in its namespace", () => {
    for (const kind of ["ConfigMap", "PodMonitor", "PrometheusRule"]) {
      const o = production.find((x) => x.kind === kind && x.metadata.name.startsWith("infergrid"));
      expect(o?.metadata.namespace, kind).toBe("infergrid");
    }
  });

  it("scrapes every pod that exports metrics on its metrics port, under the jobs the alerts name", () => {
    type Workload = K8sObject & {
      spec: {
        template: {
          metadata: { labels: Record<string, string>; annotations?: Record<string, string> };
          spec: { containers: { ports?: { name?: string; containerPort: number }[] }[] };
        };
      };
    };
    type Monitor = K8sObject & {
      spec: {
        jobLabel: string;
        selector: { matchExpressions: { key: string; operator: string; values: string[] }[] };
        podMetricsEndpoints: { port: string; honorLabels?: boolean }[];
      };
    };
    const monitor = production.find((o) => o.kind === "PodMonitor") as Monitor;
    const [expression] = monitor.spec.selector.matchExpressions;
    expect(expression).toMatchObject({ key: monitor.spec.jobLabel, operator: "In" });
    const [endpoint] = monitor.spec.podMetricsEndpoints;
    expect(endpoint?.honorLabels).toBe(true);
    const scraped = production.filter((o) => o.kind === "Deployment") as Workload[];
    const exporting = scraped.filter((w) => w.spec.template.metadata.annotations?.["prometheus.io/scrape"] === "true");
    expect(exporting.length).toBe(scraped.length);
    for (const w of exporting) {
      const app = w.spec.template.metadata.labels[monitor.spec.jobLabel]!;
      expect(expression!.values, w.metadata.name).toContain(app);
      const port = w.spec.template.spec.containers.flatMap((c) => c.ports ?? []).find((p) => p.name === endpoint!.port);
      expect(String(port?.containerPort), w.metadata.name).toBe(w.spec.template.metadata.annotations?.["prometheus.io/port"]);
    }
    // Every job an alert names is one the PodMonitor makes.
    for (const r of rules.filter((x) => x.alert))
      for (const m of r.expr.matchAll(/job(=~?)"([^"]+)"/g))
        for (const job of m[1] === "=~" ? m[2]!.split("|") : [m[2]!]) expect(expression!.values, `${r.alert}: ${job}`).toContain(job);
  });
});
