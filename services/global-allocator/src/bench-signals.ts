/**
 * What the frontends' load reports cost the allocator (and, with --signed, the predictor too): every frontend
 * reports every service once a second; each report is decoded, checked (LoadReportGate: with --signed, its seal,
 * as under --signed-heartbeats) and kept in the SignalBook for its 5-minute span; each control step then reads every
 * service's rate and outcomes (the loans' floors). Prints CPU per report and per step's reads, at each size asked.
 * Run: npm run bench:signals -- [--frontends 20,100] [--services 10,50] [--seconds 300] [--signed].
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { HeartbeatSigner, HeartbeatVerifier, LOAD_REPORT_PROOF, LoadReportGate } from "@infergrid/control-plane";
import { control } from "@infergrid/proto";
import { makeCa, makeCert } from "@infergrid/runtime";
import { SignalBook } from "./signals.js";

const { values } = parseArgs({
  options: {
    frontends: { type: "string", default: "20,100" },
    services: { type: "string", default: "10,50" },
    seconds: { type: "string", default: "300" },
    signed: { type: "boolean", default: false },
  },
});
const list = (s: string) => s.split(",").map((x) => Number(x));
const frontendCounts = list(values.frontends);
const serviceCounts = list(values.services);
const seconds = Number(values.seconds);
if ([...frontendCounts, ...serviceCounts, seconds].some((n) => !(Number.isInteger(n) && n > 0)))
  throw new Error("--frontends, --services and --seconds take positive integers");
if (frontendCounts.length !== serviceCounts.length) throw new Error("--frontends and --services take as many sizes");

const KEEP_MS = 5 * 60_000; // main.ts's SIGNAL_KEEP_MS
const cpuMs = (from: NodeJS.CpuUsage) => {
  const d = process.cpuUsage(from);
  return (d.user + d.system) / 1000;
};

const dir = mkdtempSync(join(tmpdir(), "ig-bench-signals-"));
try {
  makeCa(dir, "ca");
  // Each frontend seals with its own certificate, as in a deployment.
  const signers: HeartbeatSigner[] = [];
  if (values.signed)
    for (let f = 0; f < Math.max(...frontendCounts); f++) {
      makeCert(dir, `fe-${f}`, "ca", `URI:spiffe://infergrid/frontend/fe-${f}`);
      signers.push(new HeartbeatSigner(readFileSync(join(dir, `fe-${f}.pem`)), readFileSync(join(dir, `fe-${f}.key`))));
    }
  // The reader's clock: the simulated second the reports were sent in.
  let clock = 0;
  console.log(
    `load reports at the allocator: one a second per frontend and service, ${seconds} s, kept ${KEEP_MS / 60_000} min; ${values.signed ? "sealed and checked (--signed-heartbeats)" : "unsigned"} (node ${process.version}, ${cpus()[0]?.model ?? "?"})`,
  );
  console.log(
    "\n| frontends | services | reports | CPU µs per report (decode, gate, book) | one step's reads, every service (ms) |\n|---|---|---|---|---|",
  );
  for (let k = 0; k < frontendCounts.length; k++) {
    const frontends = frontendCounts[k] as number;
    const services = serviceCounts[k] as number;
    const gate = new LoadReportGate(values.signed ? new HeartbeatVerifier(readFileSync(join(dir, "ca.pem")), () => clock) : undefined);
    const book = new SignalBook(KEEP_MS);
    // Simulated time starts a minute ahead, within the certificates' day of validity.
    const start = Date.now() + 60_000;
    let reports = 0;
    let spent = 0;
    for (let s = 1; s <= seconds; s++) {
      const now = start + s * 1000;
      clock = now + frontends;
      // A second's reports encoded (and sealed) first, then taken in as the allocator takes them, timed together.
      const raws: Uint8Array[] = [];
      for (let f = 0; f < frontends; f++) {
        for (let i = 0; i < services; i++) {
          const encoded = control.LoadReport.encode({
            frontendId: `fe-${f}`,
            service: `svc-${i}`,
            windowStartUnixMs: now - 1000 + f,
            windowEndUnixMs: now + f,
            arrivals: 10,
            completed: 10,
            withinSlo: 10,
            serviceTimeMeanMs: 50,
          }).finish();
          const signer = signers[f];
          raws.push(signer ? signer.seal(encoded, LOAD_REPORT_PROOF) : encoded);
        }
      }
      const from = process.cpuUsage();
      for (const raw of raws) {
        const report = control.LoadReport.decode(raw);
        const problem = gate.problem(report, raw) ?? book.onLoadReport(report, now + frontends);
        if (problem) throw new Error(`a report was refused: ${problem}`);
      }
      spent += cpuMs(from);
      reports += raws.length;
    }
    const end = start + seconds * 1000 + frontends;
    const from = process.cpuUsage();
    for (let i = 0; i < services; i++) {
      book.latestRatePerS(`svc-${i}`, end, 30_000, 25_000);
      book.outcomes(`svc-${i}`, end - 25_000);
    }
    const reads = cpuMs(from);
    console.log(`| ${frontends} | ${services} | ${reports} | ${((spent * 1000) / reports).toFixed(1)} | ${reads.toFixed(1)} |`);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
