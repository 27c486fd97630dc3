import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

/**
 * Throwaway certificates for tests, made with the openssl CLI in `dir` (P-256: quick to make, valid a day).
 * `makeCa` writes `<name>.pem` / `<name>.key`; `makeCert` the same for a certificate signed by a CA, with the
 * given subjectAltName (e.g. "IP:127.0.0.1,DNS:localhost,URI:spiffe://infergrid/frontend/frontend-0").
 */
function openssl(dir: string, args: string[]): void {
  execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
}

const EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];

export function makeCa(dir: string, name: string): void {
  openssl(dir, ["req", "-x509", ...EC, "-days", "1", "-subj", `/CN=${name}`, "-keyout", `${name}.key`, "-out", `${name}.pem`]);
}

export function makeCert(dir: string, name: string, ca: string, san: string): void {
  openssl(dir, ["req", ...EC, "-subj", `/CN=${name}`, "-keyout", `${name}.key`, "-out", `${name}.csr`]);
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
    "1",
    "-extfile",
    `${name}.ext`,
    "-out",
    `${name}.pem`,
  ]);
}
