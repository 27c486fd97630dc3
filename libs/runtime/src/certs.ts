import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/**
 * Throwaway certificates made with the openssl CLI in `dir` (P-256: quick to make): the tests' and the local
 * cluster's (`npm start`), never a production CA. `makeCa` writes `<name>.pem` / `<name>.key`; `makeCert` the
 * same for a certificate signed by a CA, with the given subjectAltName (e.g.
 * "IP:127.0.0.1,DNS:localhost,URI:spiffe://infergrid/frontend/frontend-0"). Keys are readable by their owner
 * only, whatever the umask (openssl's own mode for them is not promised).
 */
function openssl(dir: string, args: string[]): void {
  execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
}

const EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];

export function makeCa(dir: string, name: string, days = 1): void {
  openssl(dir, ["req", "-x509", ...EC, "-days", String(days), "-subj", `/CN=${name}`, "-keyout", `${name}.key`, "-out", `${name}.pem`]);
  chmodSync(join(dir, `${name}.key`), 0o600);
}

export function makeCert(dir: string, name: string, ca: string, san: string, days = 1): void {
  openssl(dir, ["req", ...EC, "-subj", `/CN=${name}`, "-keyout", `${name}.key`, "-out", `${name}.csr`]);
  chmodSync(join(dir, `${name}.key`), 0o600);
  writeFileSync(join(dir, `${name}.ext`), `subjectAltName=${san}\n`);
  openssl(dir, [
    "x509",
    "-req",
    "-in",
    `${name}.csr`,
    "-CA",
    `${ca}.pem`,
    "-CAkey",
    `${ca}.key`,
    "-set_serial",
    `0x${randomBytes(8).toString("hex")}`,
    "-days",
    String(days),
    "-extfile",
    `${name}.ext`,
    "-out",
    `${name}.pem`,
  ]);
  for (const leftover of [`${name}.csr`, `${name}.ext`]) rmSync(join(dir, leftover), { force: true });
}
