import { closeSync, existsSync, openSync, readSync, statSync } from "node:fs";
import { readTraceFile, sniffFormat, type Trace, TraceFormatError } from "@infergrid/workload";
import { OptionsError } from "./options.js";

/** A raw Azure Functions day file holds tens of thousands of functions: keep this many unless told. */
export const AZURE_DEFAULT_TOP = 10;

function headerOf(path: string): string {
  const fd = openSync(path, "r");
  try {
    const buf = Buffer.alloc(4096);
    const n = readSync(fd, buf, 0, buf.length, 0);
    return (
      buf
        .subarray(0, n)
        .toString("utf8")
        .split(/\r?\n/)
        .find((l) => l.trim() !== "") ?? ""
    );
  } finally {
    closeSync(fd);
  }
}

/**
 * Reads --trace. The busiest-jobs cut of a raw Azure file is made while reading (only k rows are
 * held); a per-minute CSV is read whole and cut later. Errors name the file and what is wrong.
 */
export async function readTraceOption(path: string, topJobs: number | undefined): Promise<Trace> {
  if (!existsSync(path) || !statSync(path).isFile()) throw new OptionsError(`--trace: no such file: ${path}`);
  const format = sniffFormat(headerOf(path));
  if (format === undefined) {
    throw new OptionsError(
      `--trace: ${path} is neither a per-minute CSV (header "minute,<job>,...") nor an Azure Functions 2019 file (header "HashOwner,HashApp,HashFunction,Trigger,1,...")`,
    );
  }
  try {
    return await readTraceFile(path, format === "azure-functions-2019" ? { topK: topJobs ?? AZURE_DEFAULT_TOP } : {});
  } catch (err) {
    if (err instanceof TraceFormatError) throw new OptionsError(`--trace: ${err.message}`);
    throw err;
  }
}
