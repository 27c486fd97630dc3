import { parseArgs } from "node:util";
import { z } from "zod";

/**
 * Service configuration from flags and environment, validated by a zod schema. Each key
 * `fooBar` is read from `--foo-bar` or `${prefix}_FOO_BAR` (flags win). A bad or missing value
 * stops start-up with a message that names the flag and the variable.
 */
export class ConfigError extends Error {
  override readonly name = "ConfigError";
}

export interface LoadConfigOptions {
  envPrefix?: string;
  argv?: readonly string[];
  env?: Readonly<Record<string, string | undefined>>;
}

const kebab = (key: string) => key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
/** The environment variable a configuration key is read from (`fooBar`: `INFERGRID_FOO_BAR`). */
export const envName = (prefix: string, key: string) => `${prefix}_${key.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}`;

export function configHelp<S extends z.ZodObject>(schema: S, envPrefix = "INFERGRID"): string {
  return Object.entries(schema.shape)
    .map(([key, f]) => {
      const description = (f as z.ZodType).description ?? "";
      const fallback = (f as z.ZodType).safeParse(undefined);
      const shown = fallback.success && fallback.data !== undefined ? ` [default: ${JSON.stringify(fallback.data)}]` : "";
      return `  --${kebab(key)} (${envName(envPrefix, key)})  ${description}${shown}`;
    })
    .join("\n");
}

export function loadConfig<S extends z.ZodObject>(schema: S, options: LoadConfigOptions = {}): z.infer<S> {
  const prefix = options.envPrefix ?? "INFERGRID";
  const env = options.env ?? process.env;
  const keys = Object.keys(schema.shape);
  const flagOptions = Object.fromEntries(keys.map((k) => [kebab(k), { type: "string" as const }]));
  let flags: Record<string, string | boolean | undefined>;
  try {
    flags = parseArgs({
      args: [...(options.argv ?? process.argv.slice(2))],
      options: flagOptions,
      strict: true,
      allowPositionals: false,
    }).values;
  } catch (err) {
    throw new ConfigError(`${err instanceof Error ? err.message : String(err)}\nknown options:\n${configHelp(schema, prefix)}`);
  }
  const raw: Record<string, string> = {};
  for (const key of keys) {
    const fromFlag = flags[kebab(key)];
    const fromEnv = env[envName(prefix, key)];
    const value = typeof fromFlag === "string" ? fromFlag : fromEnv;
    if (value !== undefined && value !== "") raw[key] = value;
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => {
      const key = String(issue.path[0] ?? "");
      const given = raw[key];
      return `  --${kebab(key)} / ${envName(prefix, key)}: ${issue.message}${given === undefined ? "" : ` (got ${JSON.stringify(given)})`}`;
    });
    throw new ConfigError(`invalid configuration:\n${problems.join("\n")}`);
  }
  return parsed.data;
}

/** Field helpers: every value arrives as a string. */
export const field = {
  port: (fallback: number) => z.coerce.number().int().min(0).max(65535).default(fallback),
  int: (fallback: number, min = 0, max = Number.MAX_SAFE_INTEGER) => z.coerce.number().int().min(min).max(max).default(fallback),
  number: (fallback: number, min = -Infinity, max = Infinity) => z.coerce.number().min(min).max(max).default(fallback),
  ms: (fallback: number) => z.coerce.number().min(0).default(fallback),
  string: (fallback: string) => z.string().min(1).default(fallback),
  optionalString: () => z.string().min(1).optional(),
  bool: (fallback: boolean) =>
    z
      .enum(["true", "false", "1", "0", "yes", "no"])
      .transform((v) => v === "true" || v === "1" || v === "yes")
      .default(fallback),
  logLevel: () => z.enum(["trace", "debug", "info", "warn", "error", "fatal", "silent"]).default("info"),
  list: (fallback: string[]) =>
    z
      .string()
      .transform((s) =>
        s
          .split(",")
          .map((x) => x.trim())
          .filter(Boolean),
      )
      .default(fallback),
};
