import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseAzureFunctions2019Csv, parsePerMinuteCsv, parseTraceCsv, TraceFormatError, uniqueNames } from "./parse.js";
import { readTraceFile } from "./read.js";
import { jobCounts } from "./trace.js";

function formatError(run: () => unknown): TraceFormatError {
  try {
    run();
  } catch (error) {
    if (error instanceof TraceFormatError) return error;
    throw error;
  }
  throw new Error("expected a TraceFormatError");
}

describe("parsePerMinuteCsv", () => {
  it("parses jobs, minutes and counts, tolerating CRLF, a BOM and a trailing newline", () => {
    const trace = parsePerMinuteCsv("\ufeffminute,a,b\r\n0,5,0\r\n1,7,12\r\n", "t.csv");
    expect(trace.jobs).toEqual(["a", "b"]);
    expect(trace.minutes).toBe(2);
    expect([...jobCounts(trace, "a")]).toEqual([5, 7]);
    expect([...jobCounts(trace, "b")]).toEqual([0, 12]);
  });

  it.each([
    ["minutes,a\n0,1\n", 1, 1, /must start with 'minute'/],
    ["minute,a,a\n0,1,2\n", 1, 3, /duplicate job name "a"/],
    ["minute,a,\n0,1,2\n", 1, 3, /empty job name/],
    ["minute\n0\n", 1, 2, /no job column/],
    ["minute,a,b\n0,1,2\n1,x,2\n", 3, 2, /not a number: "x" \(a\)/],
    ["minute,a,b\n0,1,-2\n", 2, 3, /negative count -2 \(b\)/],
    ["minute,a,b\n0,1.5,2\n", 2, 2, /not an integer count: 1.5/],
    ["minute,a,b\n0,1,\n", 2, 3, /empty count/],
    ["minute,a,b\n0,1\n", 2, 3, /ragged row: 2 columns, the header has 3/],
    ["minute,a,b\n0,1,2\n1,1,2,3\n", 3, 4, /ragged row: 4 columns/],
    ["minute,a\n0,1\n2,1\n", 3, 1, /expected minute 1, found "2"/],
  ])("rejects %j at line %i column %i", (text, line, column, message) => {
    const error = formatError(() => parsePerMinuteCsv(text, "bad.csv"));
    expect(error.line).toBe(line);
    expect(error.column).toBe(column);
    expect(error.message).toMatch(message);
    expect(error.message).toContain(`bad.csv: line ${line}, column ${column}:`);
  });

  it("rejects a file with a header only or nothing at all", () => {
    expect(formatError(() => parsePerMinuteCsv("minute,a\n", "h.csv")).message).toMatch(/no data rows/);
    expect(formatError(() => parseTraceCsv("\n\n", "e.csv")).message).toMatch(/empty file/);
  });

  it("rejects an unknown header when sniffing", () => {
    const error = formatError(() => parseTraceCsv("time,a\n0,1\n", "u.csv"));
    expect(error.line).toBe(1);
    expect(error.message).toMatch(/unrecognised header "time,a"/);
  });
});

// Invented hashes; minutes 1..4 instead of 1..1440 keep the fixture readable.
const azureFixture = [
  "HashOwner,HashApp,HashFunction,Trigger,1,2,3,4",
  "own1,app1,aaaaaaaa11111111,http,1,2,3,4",
  "own1,app1,bbbbbbbb22222222,timer,100,0,0,0",
  "own2,app2,aaaaaaaa99999999,http,0,0,0,50",
  "own3,app3,cccccccc33333333,HTTP,5,5,5,5",
  "own4,app4,cccccccc33333333,http,0,0,0,1",
].join("\n");

describe("parseAzureFunctions2019Csv", () => {
  it("names functions by hash prefix, lengthened on clashes, numbered when identical", () => {
    const trace = parseAzureFunctions2019Csv(azureFixture, "d01.csv");
    expect(trace.minutes).toBe(4);
    expect(trace.jobs).toEqual(["aaaaaaaa1", "bbbbbbbb", "aaaaaaaa9", "cccccccc", "cccccccc-2"]);
    expect([...jobCounts(trace, "aaaaaaaa1")]).toEqual([1, 2, 3, 4]);
    expect([...jobCounts(trace, "cccccccc-2")]).toEqual([0, 0, 0, 1]);
  });

  it("filters by trigger case-insensitively and keeps the top k by invocations", () => {
    const http = parseAzureFunctions2019Csv(azureFixture, "d01.csv", { trigger: "http" });
    expect(http.jobs).toEqual(["aaaaaaaa1", "aaaaaaaa9", "cccccccc", "cccccccc-2"]);
    const top2 = parseAzureFunctions2019Csv(azureFixture, "d01.csv", { trigger: "http", topK: 2 });
    // Totals: aaaa..9 = 50, cccc (own3) = 20, aaaa..1 = 10, cccc (own4) = 1.
    expect(top2.jobs).toEqual(["aaaaaaaa", "cccccccc"]);
    expect([...jobCounts(top2, "aaaaaaaa")]).toEqual([0, 0, 0, 50]);
    const top1all = parseAzureFunctions2019Csv(azureFixture, "d01.csv", { topK: 1 });
    expect(top1all.jobs).toEqual(["bbbbbbbb"]);
  });

  it("reports malformed Azure files with line and column", () => {
    const badHeader = formatError(() => parseAzureFunctions2019Csv("HashOwner,HashApp,Function,Trigger,1\n", "d.csv"));
    expect([badHeader.line, badHeader.column]).toEqual([1, 3]);
    expect(badHeader.message).toMatch(/expected header column "HashFunction"/);
    const badMinute = formatError(() => parseAzureFunctions2019Csv("HashOwner,HashApp,HashFunction,Trigger,1,3\n", "d.csv"));
    expect([badMinute.line, badMinute.column]).toEqual([1, 6]);
    const negative = formatError(() => parseAzureFunctions2019Csv(azureFixture.replace("0,0,0,50", "0,0,-7,50"), "d.csv"));
    expect([negative.line, negative.column]).toEqual([4, 7]);
    expect(negative.message).toMatch(/negative count -7 \(3\)/);
    const ragged = formatError(() => parseAzureFunctions2019Csv(azureFixture.replace("100,0,0,0", "100,0,0"), "d.csv"));
    expect([ragged.line, ragged.column]).toEqual([3, 8]);
    const noHttp = formatError(() => parseAzureFunctions2019Csv(azureFixture, "d.csv", { trigger: "queue" }));
    expect(noHttp.message).toMatch(/no function rows with trigger queue/);
  });

  it("is chosen by sniffing the header", () => {
    expect(parseTraceCsv(azureFixture, "d.csv", { topK: 1 }).jobs).toEqual(["bbbbbbbb"]);
    expect(() => parseTraceCsv("minute,a\n0,1\n", "p.csv", { topK: 1 })).toThrow(/Azure Functions 2019 format only/);
  });
});

describe("uniqueNames", () => {
  it("keeps 8-character prefixes unless they clash", () => {
    expect(uniqueNames(["0123456789", "0123456780", "abcdefghij"])).toEqual(["0123456789", "0123456780", "abcdefgh"]);
    expect(uniqueNames(["abcdefgh1", "abcdefgh1", "abcdefgh2"])).toEqual(["abcdefgh1", "abcdefgh1-2", "abcdefgh2"]);
  });
});

describe("readTraceFile", () => {
  const dir = mkdtempSync(join(tmpdir(), "workload-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("streams either format from disk and reports errors with the file name", async () => {
    const azurePath = join(dir, "invocations.csv");
    writeFileSync(azurePath, azureFixture);
    const azure = await readTraceFile(azurePath, { trigger: "http", topK: 1 });
    expect(azure.jobs).toEqual(["aaaaaaaa"]);
    expect(azure.source).toBe("invocations.csv");

    const perMinutePath = join(dir, "pm.csv");
    writeFileSync(perMinutePath, "minute,x\r\n0,3\r\n1,oops\r\n");
    await expect(readTraceFile(perMinutePath)).rejects.toThrow("pm.csv: line 3, column 2: not a number");
    await expect(readTraceFile(join(dir, "missing.csv"))).rejects.toThrow(/ENOENT/);
  });
});
