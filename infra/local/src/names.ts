import { serviceNameProblem } from "@infergrid/control-plane";

const MAX_NAME = 63;

/**
 * A trace job name turned into a valid service name ([a-z0-9][a-z0-9-]{0,62}): service names end
 * up in NATS subjects and KV keys, so anything else is refused by the allocator.
 */
export function sanitiseServiceName(job: string): string {
  const cleaned = job
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, "-")
    .replace(/-{2,}/g, "-")
    .replace(/^-+/, "")
    .slice(0, MAX_NAME)
    .replace(/-+$/, "");
  return cleaned === "" ? "job" : cleaned;
}

/**
 * Sanitised names for all jobs, unique: two jobs that sanitise alike (`Fn.A`, `fn-a`) get `-2`,
 * `-3` ... in order, shortened so the suffix still fits.
 */
export function uniqueServiceNames(jobs: readonly string[]): Map<string, string> {
  const taken = new Set<string>();
  const out = new Map<string, string>();
  for (const job of jobs) {
    const base = sanitiseServiceName(job);
    let name = base;
    for (let k = 2; taken.has(name); k++) {
      const suffix = `-${k}`;
      name = `${base.slice(0, MAX_NAME - suffix.length).replace(/-+$/, "")}${suffix}`;
    }
    const problem = serviceNameProblem(name);
    if (problem) throw new Error(`cannot derive a service name from job ${JSON.stringify(job)}: ${problem}`);
    taken.add(name);
    out.set(job, name);
  }
  return out;
}
