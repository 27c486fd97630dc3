import { makeTrace, type Trace } from "./trace.js";

/** A malformed trace file. `line` and `column` are 1-based (column = CSV field number). */
export class TraceFormatError extends Error {
  override readonly name = "TraceFormatError";
  constructor(
    readonly source: string,
    readonly line: number,
    readonly column: number | undefined,
    readonly detail: string,
  ) {
    super(`${source}: line ${line}${column === undefined ? "" : `, column ${column}`}: ${detail}`);
  }
}

/**
 * Receives a file line by line (1-based numbers, without the newline) so that the same parser serves
 * an in-memory string and a streamed file: a raw Azure day file is ~150 MB.
 */
export interface LineParser {
  line(text: string, lineNumber: number): void;
  finish(): Trace;
}

export type TraceFormat = "per-minute" | "azure-functions-2019";

export interface AzureOptions {
  /** Keep only functions with this trigger (or any of these), case-insensitive, e.g. "http". */
  trigger?: string | readonly string[];
  /**
   * Keep the k functions with the most invocations (after the trigger filter), largest first. Only k rows are
   * held while reading; without topK every kept row is (about 11.5 KB a row for 1440 minutes).
   */
  topK?: number;
}

const AZURE_FIXED = ["HashOwner", "HashApp", "HashFunction", "Trigger"] as const;

/** Which format a header line is, or undefined. */
export function sniffFormat(headerLine: string): TraceFormat | undefined {
  const first = stripBom(headerLine).split(",", 1)[0]?.trim();
  if (first === "minute") return "per-minute";
  if (first === AZURE_FIXED[0]) return "azure-functions-2019";
  return undefined;
}

/** The format of /work/shared/traces/*.csv: `minute,<job1>,...`, one row a minute from 0, integer counts. */
export function parsePerMinuteCsv(text: string, source: string): Trace {
  return feedText(text, perMinuteParser(source));
}

/**
 * The Azure Functions 2019 invocation files (`invocations_per_function_md.anon.dXX.csv`):
 * `HashOwner,HashApp,HashFunction,Trigger,1,...,1440`, one row per function. Jobs are named by the first
 * 8 characters of HashFunction, lengthened where two would clash; identical hashes get `-2`, `-3` in row order.
 * Rows removed by the trigger filter are checked for their column count only.
 */
export function parseAzureFunctions2019Csv(text: string, source: string, options: AzureOptions = {}): Trace {
  return feedText(text, azureParser(source, options));
}

/** Parses text in either format, chosen from its header. */
export function parseTraceCsv(text: string, source: string, options: AzureOptions = {}): Trace {
  let parser: LineParser | undefined;
  forEachLine(text, (line, n) => {
    if (parser === undefined) {
      if (isBlank(line)) return;
      parser = parserFor(line, n, source, options);
    }
    parser.line(line, n);
  });
  if (parser === undefined) throw new TraceFormatError(source, 1, undefined, "empty file: no header");
  return parser.finish();
}

/** The parser for a file whose first non-blank line is `header`; throws if the format is unknown. */
export function parserFor(header: string, lineNumber: number, source: string, options: AzureOptions = {}): LineParser {
  const format = sniffFormat(header);
  if (format === "azure-functions-2019") return azureParser(source, options);
  if (format === "per-minute") {
    if (options.trigger !== undefined || options.topK !== undefined) {
      throw new Error(`${source}: trigger/topK apply to the Azure Functions 2019 format only; this is a per-minute file (use topJobs)`);
    }
    return perMinuteParser(source);
  }
  throw new TraceFormatError(
    source,
    lineNumber,
    1,
    `unrecognised header ${quote(header.slice(0, 60))}: expected 'minute,<job>,...' or 'HashOwner,HashApp,HashFunction,Trigger,1,...,1440'`,
  );
}

export function perMinuteParser(source: string): LineParser {
  let jobs: string[] | undefined;
  const columns: number[][] = [];
  return {
    line(raw, n) {
      const text = n === 1 ? stripBom(raw) : raw;
      if (isBlank(text)) return;
      const fields = text.split(",");
      if (jobs === undefined) {
        if (fields[0]?.trim() !== "minute") {
          throw new TraceFormatError(source, n, 1, `header must start with 'minute', found ${quote(fields[0] ?? "")}`);
        }
        jobs = checkNames(fields.slice(1), source, n, 2);
        if (jobs.length === 0) throw new TraceFormatError(source, n, 2, "header names no job column");
        for (let j = 0; j < jobs.length; j++) columns.push([]);
        return;
      }
      checkWidth(fields, jobs.length + 1, source, n);
      const minute = columns[0]?.length ?? 0;
      const stated = parseCount(fields[0] as string);
      if (stated !== minute) {
        throw new TraceFormatError(
          source,
          n,
          1,
          `expected minute ${minute}, found ${quote(fields[0] as string)} (rows must be consecutive from 0)`,
        );
      }
      for (let j = 0; j < jobs.length; j++) {
        (columns[j] as number[]).push(countOrThrow(fields[j + 1] as string, source, n, j + 2, jobs[j]));
      }
    },
    finish() {
      if (jobs === undefined) throw new TraceFormatError(source, 1, undefined, "empty file: no header");
      const minutes = columns[0]?.length ?? 0;
      if (minutes === 0) throw new TraceFormatError(source, 2, undefined, "no data rows after the header");
      const counts = new Map<string, Float64Array>();
      jobs.forEach((job, j) => {
        counts.set(job, Float64Array.from(columns[j] as number[]));
      });
      return makeTrace(jobs, counts, minutes, source);
    },
  };
}

interface AzureRow {
  owner: string;
  app: string;
  fn: string;
  order: number;
  total: number;
  counts: Float64Array;
}

export function azureParser(source: string, options: AzureOptions = {}): LineParser {
  const triggers = options.trigger === undefined ? undefined : new Set([options.trigger].flat().map((t) => t.toLowerCase()));
  const topK = options.topK;
  if (topK !== undefined && (!Number.isInteger(topK) || topK < 1)) throw new RangeError(`topK must be a positive integer, got ${topK}`);
  let minutes: number | undefined;
  // With topK only the k largest rows are kept (a min-heap), so a full day file never sits in memory.
  const kept: AzureRow[] = [];
  let order = 0;
  return {
    line(raw, n) {
      const text = n === 1 ? stripBom(raw) : raw;
      if (isBlank(text)) return;
      const fields = text.split(",");
      if (minutes === undefined) {
        minutes = checkAzureHeader(fields, source, n);
        return;
      }
      checkWidth(fields, minutes + AZURE_FIXED.length, source, n);
      const [owner, app, fn, trigger] = fields as [string, string, string, string];
      for (const [i, value] of [owner, app, fn].entries()) {
        if (value.trim() === "") throw new TraceFormatError(source, n, i + 1, `empty ${AZURE_FIXED[i]}`);
      }
      if (triggers !== undefined && !triggers.has(trigger.trim().toLowerCase())) return;
      const counts = new Float64Array(minutes);
      let total = 0;
      for (let m = 0; m < minutes; m++) {
        const c = countOrThrow(fields[m + AZURE_FIXED.length] as string, source, n, m + AZURE_FIXED.length + 1, String(m + 1));
        counts[m] = c;
        total += c;
      }
      const row: AzureRow = { owner: owner.trim(), app: app.trim(), fn: fn.trim(), order: order++, total, counts };
      if (topK === undefined) kept.push(row);
      else offerTopK(kept, row, topK);
    },
    finish() {
      if (minutes === undefined) throw new TraceFormatError(source, 1, undefined, "empty file: no header");
      if (topK !== undefined) kept.sort((a, b) => (above(a, b) ? -1 : above(b, a) ? 1 : 0));
      if (kept.length === 0) {
        const what = triggers === undefined ? "" : ` with trigger ${[...triggers].join("/")}`;
        throw new TraceFormatError(source, 2, undefined, `no function rows${what}`);
      }
      const names = uniqueNames(kept.map((r) => r.fn));
      const counts = new Map<string, Float64Array>();
      kept.forEach((row, i) => {
        counts.set(names[i] as string, row.counts);
      });
      return makeTrace(names, counts, minutes, source);
    },
  };
}

function checkAzureHeader(fields: readonly string[], source: string, n: number): number {
  AZURE_FIXED.forEach((name, i) => {
    if (fields[i]?.trim() !== name) {
      throw new TraceFormatError(source, n, i + 1, `expected header column ${quote(name)}, found ${quote(fields[i] ?? "(missing)")}`);
    }
  });
  const minutes = fields.length - AZURE_FIXED.length;
  if (minutes === 0) throw new TraceFormatError(source, n, AZURE_FIXED.length + 1, "header has no minute columns (expected 1,...,1440)");
  for (let m = 0; m < minutes; m++) {
    const field = fields[m + AZURE_FIXED.length] as string;
    if (parseCount(field) !== m + 1) {
      throw new TraceFormatError(source, n, m + AZURE_FIXED.length + 1, `expected minute column ${m + 1}, found ${quote(field)}`);
    }
  }
  return minutes;
}

/** True when a ranks above b: more invocations, then earlier in the file. */
function above(a: AzureRow, b: AzureRow): boolean {
  return a.total > b.total || (a.total === b.total && a.order < b.order);
}

/** Min-heap on rank: heap[0] is the weakest kept row. */
function offerTopK(heap: AzureRow[], row: AzureRow, k: number): void {
  if (heap.length < k) {
    heap.push(row);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!above(heap[parent] as AzureRow, heap[i] as AzureRow)) break;
      [heap[parent], heap[i]] = [heap[i] as AzureRow, heap[parent] as AzureRow];
      i = parent;
    }
    return;
  }
  if (!above(row, heap[0] as AzureRow)) return;
  heap[0] = row;
  let i = 0;
  for (;;) {
    const l = 2 * i + 1;
    const r = l + 1;
    let weakest = i;
    if (l < heap.length && above(heap[weakest] as AzureRow, heap[l] as AzureRow)) weakest = l;
    if (r < heap.length && above(heap[weakest] as AzureRow, heap[r] as AzureRow)) weakest = r;
    if (weakest === i) return;
    [heap[weakest], heap[i]] = [heap[i] as AzureRow, heap[weakest] as AzureRow];
    i = weakest;
  }
}

/** Short names: 8-character prefixes, lengthened for the keys that clash, then numbered if whole keys repeat. */
export function uniqueNames(keys: readonly string[], minLength = 8): string[] {
  const lengths = keys.map(() => minLength);
  for (;;) {
    const byName = new Map<string, number[]>();
    keys.forEach((key, i) => {
      const name = key.slice(0, lengths[i]);
      byName.set(name, [...(byName.get(name) ?? []), i]);
    });
    let grew = false;
    for (const group of byName.values()) {
      // Lengthening cannot separate identical hashes: those are numbered below.
      if (group.length < 2 || new Set(group.map((i) => keys[i])).size < 2) continue;
      for (const i of group) {
        const len = lengths[i] as number;
        if (len < (keys[i] as string).length) {
          lengths[i] = len + 1;
          grew = true;
        }
      }
    }
    if (!grew) break;
  }
  const seen = new Map<string, number>();
  return keys.map((key, i) => {
    const name = key.slice(0, lengths[i]);
    const times = (seen.get(name) ?? 0) + 1;
    seen.set(name, times);
    return times === 1 ? name : `${name}-${times}`;
  });
}

function checkNames(names: readonly string[], source: string, n: number, firstColumn: number): string[] {
  const seen = new Set<string>();
  return names.map((raw, i) => {
    const name = raw.trim();
    if (name === "") throw new TraceFormatError(source, n, firstColumn + i, "empty job name in header");
    if (seen.has(name)) throw new TraceFormatError(source, n, firstColumn + i, `duplicate job name ${quote(name)}`);
    seen.add(name);
    return name;
  });
}

function checkWidth(fields: readonly string[], expected: number, source: string, n: number): void {
  if (fields.length === expected) return;
  const column = fields.length < expected ? fields.length + 1 : expected + 1;
  const what = fields.length < expected ? "missing" : "extra";
  throw new TraceFormatError(
    source,
    n,
    column,
    `ragged row: ${fields.length} columns, the header has ${expected} (${what} from column ${column})`,
  );
}

/** A non-negative integer written in plain digits, or NaN. Hand-rolled: a day file has 66 million cells. */
function parseCount(field: string): number {
  let start = 0;
  let end = field.length;
  while (start < end && field.charCodeAt(start) === 32) start++;
  while (end > start && (field.charCodeAt(end - 1) === 32 || field.charCodeAt(end - 1) === 13)) end--;
  if (start === end) return Number.NaN;
  let value = 0;
  for (let i = start; i < end; i++) {
    const d = field.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return Number.NaN;
    value = value * 10 + d;
  }
  return value;
}

function countOrThrow(field: string, source: string, n: number, column: number, columnName: string | undefined): number {
  const value = parseCount(field);
  if (!Number.isNaN(value) && Number.isSafeInteger(value)) return value;
  const at = columnName === undefined ? "" : ` (${columnName})`;
  const trimmed = field.trim();
  const number = Number(trimmed);
  let why: string;
  if (trimmed === "") why = "empty count";
  else if (Number.isNaN(number)) why = `not a number: ${quote(trimmed)}`;
  else if (number < 0) why = `negative count ${trimmed}`;
  else if (!Number.isInteger(number)) why = `not an integer count: ${trimmed}`;
  else why = `count must be plain digits: ${quote(trimmed)}`;
  throw new TraceFormatError(source, n, column, `${why}${at}`);
}

function feedText(text: string, parser: LineParser): Trace {
  forEachLine(text, (line, n) => parser.line(line, n));
  return parser.finish();
}

function forEachLine(text: string, visit: (line: string, lineNumber: number) => void): void {
  let start = 0;
  let n = 1;
  while (start <= text.length) {
    let end = text.indexOf("\n", start);
    if (end === -1) end = text.length;
    const line = end > start && text.charCodeAt(end - 1) === 13 ? text.slice(start, end - 1) : text.slice(start, end);
    visit(line, n);
    start = end + 1;
    n++;
  }
}

function stripBom(line: string): string {
  return line.charCodeAt(0) === 0xfeff ? line.slice(1) : line;
}

function isBlank(line: string): boolean {
  return line.trim() === "";
}

function quote(text: string): string {
  return JSON.stringify(text);
}
