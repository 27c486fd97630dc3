import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { appendBytesFields, control } from "@infergrid/proto";
import { makeCa, makeCert } from "@infergrid/runtime";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HEARTBEAT_MAX_SKEW_MS, HeartbeatSigner, HeartbeatVerifier, LOAD_REPORT_PROOF } from "./heartbeat-signature.js";

/** Real certificates (openssl, a throwaway CA per run): the checks a heartbeat must pass under --signed-heartbeats. */
const dir = mkdtempSync(join(tmpdir(), "ig-hb-sig-"));
const pem = (name: string) => readFileSync(join(dir, name));
/** Set once the certificates exist: they are valid from the second they were issued. */
let NOW = 0;

beforeAll(() => {
  makeCa(dir, "ca");
  makeCa(dir, "other-ca");
  makeCa(dir, "next-ca");
  makeCert(dir, "frontend-0", "ca", "URI:spiffe://infergrid/frontend/frontend-0");
  makeCert(dir, "backend-3", "ca", "URI:spiffe://infergrid/backend/backend-3,DNS:backend");
  makeCert(dir, "rogue", "other-ca", "URI:spiffe://infergrid/frontend/frontend-0");
  makeCert(dir, "anonymous", "ca", "DNS:frontend");
  makeCert(dir, "rotated", "next-ca", "URI:spiffe://infergrid/frontend/frontend-0");
  NOW = Date.now();
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

const signer = (name: string) => new HeartbeatSigner(pem(`${name}.pem`), pem(`${name}.key`));
const beat = (hb: Partial<control.IHeartbeat>) =>
  control.Heartbeat.encode({
    role: control.Role.ROLE_FRONTEND,
    id: "frontend-0",
    address: "10.0.0.1:50051",
    sentAtUnixMs: NOW,
    seq: 7,
    ...hb,
  }).finish();
const check = (raw: Uint8Array, verifier = new HeartbeatVerifier(pem("ca.pem"), () => NOW)) =>
  verifier.problem(control.Heartbeat.decode(raw), raw);

describe("signed heartbeats", () => {
  it("signs with a renewed certificate, and reads with a renewed CA bundle (files renewed in place)", () => {
    const s = signer("frontend-0");
    const verifier = new HeartbeatVerifier(pem("ca.pem"), () => NOW);
    // The CA rotates: the new CA's certificate is refused until the bundle holds it; the renewed signer's is kept.
    s.renew(pem("rotated.pem"), pem("rotated.key"));
    expect(check(s.seal(beat({})), verifier)).toBe("its certificate is not from the cluster's CA");
    verifier.trust(Buffer.concat([pem("ca.pem"), pem("next-ca.pem")]));
    expect(check(s.seal(beat({})), verifier)).toBeUndefined();
    // A pair that does not belong together is refused, and the signer keeps the one it had.
    expect(() => s.renew(pem("frontend-0.pem"), pem("rotated.key"))).toThrow(/not the certificate's/);
    expect(check(s.seal(beat({})), verifier)).toBeUndefined();
    expect(() => verifier.trust("no certificate here")).toThrow(/no CA certificate/);
  });

  it("keeps a heartbeat signed by its own member's certificate of the CA", () => {
    expect(check(signer("frontend-0").seal(beat({})))).toBeUndefined();
    const backend = signer("backend-3").seal(beat({ role: control.Role.ROLE_BACKEND, id: "backend-3", backend: { cores: 2 } }));
    expect(check(backend)).toBeUndefined();
  });

  it("refuses an unsigned heartbeat", () => {
    expect(check(beat({}))).toBe("unsigned (no certificate or no signature)");
  });

  it("refuses a member speaking for another (another id, another role), with its own valid certificate", () => {
    const s = signer("frontend-0");
    expect(check(s.seal(beat({ id: "frontend-1", draining: true })))).toBe(
      "signed by frontend/frontend-0, but speaks for frontend/frontend-1",
    );
    expect(check(s.seal(beat({ role: control.Role.ROLE_BACKEND })))).toBe(
      "signed by frontend/frontend-0, but speaks for backend/frontend-0",
    );
  });

  it("refuses a certificate from another CA, and one that names no identity", () => {
    expect(check(signer("rogue").seal(beat({})))).toBe("its certificate is not from the cluster's CA");
    expect(check(signer("anonymous").seal(beat({})))).toBe("its certificate names no spiffe://infergrid/<role>/<id> identity");
  });

  it("refuses content changed after signing: a field appended, or a field replaced", () => {
    const sealed = signer("frontend-0").seal(beat({ draining: false }));
    const appended = new Uint8Array([...sealed, ...control.Heartbeat.encode({ draining: true }).finish()]);
    expect(control.Heartbeat.decode(appended).draining).toBe(true);
    expect(check(appended)).toBe("its signature does not match its content");
    // Someone else's certificate put in front of a real signature.
    const swapped = appendBytesFields(sealed, [[10, new Uint8Array(readCertDer("backend-3"))]]);
    expect(check(swapped)).toBe("signed by backend/backend-3, but speaks for frontend/frontend-0");
  });

  it("refuses a replay older than the allowed skew, and a certificate outside its validity", () => {
    const old = signer("frontend-0").seal(beat({ sentAtUnixMs: NOW - HEARTBEAT_MAX_SKEW_MS - 1 }));
    expect(check(old)).toMatch(/a replay or a bad clock/);
    const sealed = signer("frontend-0").seal(beat({}));
    expect(check(sealed, new HeartbeatVerifier(pem("ca.pem"), () => NOW + 3 * 86_400_000))).toBe("its certificate is not valid now");
  });

  it("accepts either CA of a bundle during a CA rotation", () => {
    const bundle = Buffer.concat([pem("ca.pem"), pem("next-ca.pem")]);
    const v = new HeartbeatVerifier(bundle, () => NOW);
    expect(check(signer("frontend-0").seal(beat({})), v)).toBeUndefined();
    expect(check(signer("rotated").seal(beat({})), v)).toBeUndefined();
    expect(check(signer("rotated").seal(beat({})))).toBe("its certificate is not from the cluster's CA");
  });

  it("refuses a signing key that is not its certificate's", () => {
    expect(() => new HeartbeatSigner(pem("frontend-0.pem"), pem("backend-3.key"))).toThrow(/not the certificate's/);
  });
});

describe("signed job results", () => {
  const result = (r: Partial<control.IJobItemResult>) =>
    control.JobItemResult.encode({
      job: "nightly",
      item: 17,
      backendId: "backend-3",
      digest: "ab".repeat(32),
      computeMs: 41,
      doneAtUnixMs: NOW,
      ...r,
    }).finish();
  const checkResult = (raw: Uint8Array, verifier = new HeartbeatVerifier(pem("ca.pem"), () => NOW)) =>
    verifier.jobResultProblem(control.JobItemResult.decode(raw), raw);

  it("counts a result sealed by the backend it names, also once the certificate has expired", () => {
    const sealed = signer("backend-3").seal(result({}));
    expect(checkResult(sealed)).toBeUndefined();
    // Read three days later, past the certificate's validity: it was valid when the item was done.
    expect(checkResult(sealed, new HeartbeatVerifier(pem("ca.pem"), () => NOW + 3 * 86_400_000))).toBeUndefined();
  });

  it("refuses a result unsigned, sealed by another member, or naming another backend", () => {
    expect(checkResult(result({}))).toBe("unsigned (no certificate or no signature)");
    expect(checkResult(signer("frontend-0").seal(result({})))).toBe('signed by frontend/frontend-0, but names backend "backend-3"');
    expect(checkResult(signer("backend-3").seal(result({ backendId: "backend-1" })))).toBe(
      'signed by backend/backend-3, but names backend "backend-1"',
    );
    expect(checkResult(signer("rogue").seal(result({})))).toBe("its certificate is not from the cluster's CA");
  });

  it("refuses a result changed after sealing, and done times its certificate cannot vouch for", () => {
    const sealed = signer("backend-3").seal(result({}));
    const changed = new Uint8Array([...sealed, ...control.JobItemResult.encode({ digest: "cd".repeat(32) }).finish()]);
    expect(control.JobItemResult.decode(changed).digest).toBe("cd".repeat(32));
    expect(checkResult(changed)).toBe("its signature does not match its content");
    expect(checkResult(signer("backend-3").seal(result({ doneAtUnixMs: NOW + 3 * 86_400_000 })))).toMatch(/ahead of this reader's clock/);
    const later = new HeartbeatVerifier(pem("ca.pem"), () => NOW + 3 * 86_400_000);
    expect(checkResult(signer("backend-3").seal(result({ doneAtUnixMs: NOW + 2 * 86_400_000 })), later)).toBe(
      "its certificate was not valid when it says the item was done",
    );
    const verifier = new HeartbeatVerifier(pem("ca.pem"), () => NOW);
    expect(verifier.jobResultProblem(control.JobItemResult.create(), new Uint8Array([0xff, 0xff]))).toMatch(/^not a job result/);
  });
});

describe("signed load reports", () => {
  const checkReport = (raw: Uint8Array, verifier = new HeartbeatVerifier(pem("ca.pem"), () => NOW)) =>
    verifier.loadReportProblem(control.LoadReport.decode(raw), raw);

  it("counts a report sealed by the frontend it names, in its own proof fields", () => {
    const sealed = signer("frontend-0").seal(loadReport({}), LOAD_REPORT_PROOF);
    expect(checkReport(sealed)).toBeUndefined();
    // Fields 10 and 11 of a report are its p99 and its frontends' estimate: the proof must not land on them.
    const decoded = control.LoadReport.decode(sealed);
    expect(decoded.latencyP99Ms).toBe(180);
    expect(decoded.frontendsEstimate).toBe(3);
    expect(decoded.certificate.length).toBeGreaterThan(0);
    // Sealed as a heartbeat is (fields 10 and 11), it does not read as signed.
    expect(checkReport(signer("frontend-0").seal(loadReport({})))).toBe("unsigned (no certificate or no signature)");
  });

  it("refuses a report unsigned, sealed by another member or CA, changed after sealing, or stale", () => {
    expect(checkReport(loadReport({}))).toBe("unsigned (no certificate or no signature)");
    expect(checkReport(signer("frontend-0").seal(loadReport({ frontendId: "frontend-1" }), LOAD_REPORT_PROOF))).toBe(
      'signed by frontend/frontend-0, but speaks for frontend "frontend-1"',
    );
    expect(checkReport(signer("backend-3").seal(loadReport({ frontendId: "backend-3" }), LOAD_REPORT_PROOF))).toBe(
      'signed by backend/backend-3, but speaks for frontend "backend-3"',
    );
    expect(checkReport(signer("rogue").seal(loadReport({}), LOAD_REPORT_PROOF))).toBe("its certificate is not from the cluster's CA");
    const sealed = signer("frontend-0").seal(loadReport({}), LOAD_REPORT_PROOF);
    const inflated = new Uint8Array([...sealed, ...control.LoadReport.encode({ arrivals: 1_000_000 }).finish()]);
    expect(Number(control.LoadReport.decode(inflated).arrivals)).toBe(1_000_000);
    expect(checkReport(inflated)).toBe("its signature does not match its content");
    const late = new HeartbeatVerifier(pem("ca.pem"), () => NOW + HEARTBEAT_MAX_SKEW_MS + 1);
    expect(checkReport(sealed, late)).toMatch(/ms from now \(a replay or a bad clock\)$/);
    expect(checkReport(sealed, new HeartbeatVerifier(pem("ca.pem"), () => NOW + HEARTBEAT_MAX_SKEW_MS))).toBeUndefined();
  });
});

function loadReport(r: Partial<control.ILoadReport>): Uint8Array {
  return control.LoadReport.encode({
    frontendId: "frontend-0",
    service: "resnet",
    windowStartUnixMs: NOW - 1000,
    windowEndUnixMs: NOW,
    arrivals: 40,
    latencyP99Ms: 180,
    frontendsEstimate: 3,
    ...r,
  }).finish();
}

function readCertDer(name: string): Buffer {
  const text = pem(`${name}.pem`).toString();
  const body = text.replace(/-----(BEGIN|END) CERTIFICATE-----/g, "").replace(/\s+/g, "");
  return Buffer.from(body, "base64");
}
