import { createReadStream } from "node:fs";
import { basename } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { type AzureOptions, type LineParser, parserFor, TraceFormatError } from "./parse.js";
import type { Trace } from "./trace.js";

export interface ReadTraceOptions extends AzureOptions {
  /** Name used in errors and in Trace.source; the file's base name by default. */
  source?: string;
}

/**
 * Reads a trace file of either format (sniffed from its header), streaming it line by line so that a raw
 * Azure day file (~150 MB) is never held as one string.
 */
export async function readTraceFile(path: string | URL, options: ReadTraceOptions = {}): Promise<Trace> {
  const filePath = typeof path === "string" ? path : fileURLToPath(path);
  const source = options.source ?? basename(filePath);
  const input = createReadStream(filePath, { encoding: "utf8" });
  const lines = createInterface({ input, crlfDelay: Number.POSITIVE_INFINITY });
  let parser: LineParser | undefined;
  let n = 0;
  try {
    for await (const line of lines) {
      n++;
      if (parser === undefined) {
        if (line.trim() === "") continue;
        parser = parserFor(line, n, source, options);
      }
      parser.line(line, n);
    }
  } finally {
    lines.close();
    input.destroy();
  }
  if (parser === undefined) throw new TraceFormatError(source, 1, undefined, "empty file: no header");
  return parser.finish();
}
