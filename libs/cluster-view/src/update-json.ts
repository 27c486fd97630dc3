import { consoleView } from "@infergrid/proto";

/**
 * An update as the page reads it: proto3 JSON of ConsoleUpdate (zero values left out, 64-bit integers as
 * numbers). Going through the generated message checks the update against proto/ before it is sent.
 */
export function updateJson(update: consoleView.ConsoleUpdate.$Properties): string {
  const message = consoleView.ConsoleUpdate.fromObject(update as Record<string, unknown>);
  return JSON.stringify(consoleView.ConsoleUpdate.toObject(message, { longs: Number, enums: String }));
}
