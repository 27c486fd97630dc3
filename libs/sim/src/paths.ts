/**
 * Where the simulator finds its inputs: the repository root, the scenario files (scenarios/ at the root) and
 * the shared traces and profiles (../shared/traces and ../shared/profiles beside the root, read by path and
 * never copied).
 */
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root: the nearest ancestor of this module holding pnpm-workspace.yaml. */
export function repoRoot(from: string = dirname(fileURLToPath(import.meta.url))): string {
  let dir = resolve(from);
  for (;;) {
    if (existsSync(join(dir, "pnpm-workspace.yaml"))) return dir;
    const up = dirname(dir);
    if (up === dir) throw new Error(`no pnpm-workspace.yaml above ${from}`);
    dir = up;
  }
}

/** ../shared/traces beside the repository root. */
export function defaultTracesDir(): string {
  return resolve(repoRoot(), "..", "shared", "traces");
}

/** ../shared/profiles beside the repository root (measured latency tables). */
export function defaultProfilesDir(): string {
  return resolve(repoRoot(), "..", "shared", "profiles");
}

/** scenarios/ at the repository root: the named scenarios (`npm run sim -- <name>` loads scenarios/<name>.yaml). */
export function scenariosDir(): string {
  return join(repoRoot(), "scenarios");
}

/**
 * A file a scenario names: absolute as is; otherwise beside the scenario file if it is there, else in
 * `fallbackDir` (--traces or --profiles). Undefined when neither holds it.
 */
export function resolveInput(file: string, scenarioDir: string | undefined, fallbackDir: string): string | undefined {
  const candidates = file.startsWith("/")
    ? [file]
    : [...(scenarioDir === undefined ? [] : [join(scenarioDir, file)]), join(fallbackDir, file)];
  return candidates.find((p) => existsSync(p));
}
