import { parseArgs } from "node:util";
import { CLIENT_NAME, clientTokenLine, newClientToken } from "@infergrid/dataplane";

/**
 * Makes a client token for the broker's client auth: `npm run -s client-token -- <name> [--services a,b] [--line]`.
 * The token goes to the client, the line (the token's SHA-256, never the token, and the services the client may
 * call when `--services` is given) into the broker's --client-tokens-file. By
 * default the token is written to stdout and the line to stderr; with --line the other way round, so that
 * `... --line >> tokens` appends the line and shows the token.
 */
const usage = "usage: client-token <client-name> [--services <service>,...] [--line]\n";

const options = { line: { type: "boolean" }, services: { type: "string" }, help: { type: "boolean" } } as const;

function parse(argv: readonly string[]) {
  try {
    return parseArgs({ args: [...argv], options, allowPositionals: true });
  } catch (err) {
    return { problem: err instanceof Error ? err.message : String(err) };
  }
}

function main(argv: readonly string[]): number {
  const parsed = parse(argv);
  if ("problem" in parsed) {
    process.stderr.write(`${parsed.problem}\n${usage}`);
    return 2;
  }
  if (parsed.values.help) {
    process.stdout.write(usage);
    return 0;
  }
  const [name, ...rest] = parsed.positionals;
  if (name === undefined || rest.length > 0) {
    process.stderr.write(usage);
    return 2;
  }
  if (!CLIENT_NAME.test(name)) {
    process.stderr.write(`client-token: the name must match ${CLIENT_NAME.source}\n`);
    return 2;
  }
  const token = newClientToken();
  let line: string;
  try {
    line = clientTokenLine(name, token, parsed.values.services?.split(","));
  } catch (err) {
    process.stderr.write(`client-token: ${err instanceof Error ? err.message : String(err)}\n`);
    return 2;
  }
  if (parsed.values.line) {
    process.stdout.write(`${line}\n`);
    process.stderr.write(`token for ${name} (give it to the client; it is not stored anywhere): ${token}\n`);
  } else {
    process.stdout.write(`${token}\n`);
    process.stderr.write(`add this line to the broker's --client-tokens-file, then send the broker SIGHUP:\n${line}\n`);
  }
  return 0;
}

process.exitCode = main(process.argv.slice(2));
