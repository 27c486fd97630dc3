import { createHash, createPrivateKey, type KeyObject, sign, verify, X509Certificate } from "node:crypto";
import { appendBytesFields, type control, encodeMessage, type MessageType, splitFields } from "@infergrid/proto";
import { identityFromSubjectAltName } from "@infergrid/runtime";
import { roleNameOf } from "./subjects.js";

/**
 * Signed heartbeats and job results (docs/security.md). NATS permissions bind a heartbeat subject to a NATS user,
 * but in Kubernetes the users are per role, so any frontend pod could publish another frontend's heartbeat, and
 * any backend may write the job results' bucket. Each pod's certificate names it (spiffe://infergrid/<role>/<id>,
 * issued per pod), so a process signs its heartbeats (and a backend its job results) with its gRPC certificate's
 * key, and a reader with --signed-heartbeats keeps one only when the certificate chains to its CA and names the
 * sender the message names, and the signature holds.
 */

/** Where a sealed message carries its sender's certificate and signature (control.proto). */
export interface ProofFields {
  readonly certificate: number;
  readonly signature: number;
}

/** Heartbeats' and job results' proof fields. */
export const HEARTBEAT_PROOF: ProofFields = { certificate: 10, signature: 11 };
/** Load reports' (their fields 10 and 11 were taken before reports were signed). */
export const LOAD_REPORT_PROOF: ProofFields = { certificate: 30, signature: 31 };

/**
 * How far a heartbeat's send time may be from the reader's clock. Bounds how long a captured heartbeat can be
 * replayed (it can only repeat what its member said, and only for this long) while tolerating skewed clocks.
 */
export const HEARTBEAT_MAX_SKEW_MS = 30_000;

/** Certificates already checked, by their bytes' hash: the chain is verified once, not every second. */
const MAX_CACHED_CERTIFICATES = 10_000;

export class HeartbeatSigner {
  private certificate: Uint8Array;
  private key: KeyObject;

  /** `certPem`: the process's own certificate first (a chain may follow); `keyPem`: its private key. */
  constructor(certPem: Buffer | string, keyPem: Buffer | string) {
    [this.certificate, this.key] = HeartbeatSigner.read(certPem, keyPem);
  }

  /** Signs with a renewed certificate and key from now on (throws, keeping the old pair, if they do not match). */
  renew(certPem: Buffer | string, keyPem: Buffer | string): void {
    [this.certificate, this.key] = HeartbeatSigner.read(certPem, keyPem);
  }

  private static read(certPem: Buffer | string, keyPem: Buffer | string): [Uint8Array, KeyObject] {
    const cert = new X509Certificate(certPem);
    const key = createPrivateKey(keyPem);
    if (!cert.checkPrivateKey(key)) throw new Error("the heartbeat signing key is not the certificate's");
    return [cert.raw, key];
  }

  /**
   * The message's bytes (a heartbeat, a job item's result, or with LOAD_REPORT_PROOF a load report) with the
   * certificate and the signature over them appended.
   */
  seal(encoded: Uint8Array, proof: ProofFields = HEARTBEAT_PROOF): Uint8Array {
    const signature = sign("sha256", encoded, this.key);
    return appendBytesFields(encoded, [
      [proof.certificate, this.certificate],
      [proof.signature, signature],
    ]);
  }
}

/** A message's bytes as it goes out: sealed (`proof`: where its message type carries the seal) when there is a signer. */
export function encodeSealed<T, P>(type: MessageType<T, P>, message: P, signer?: HeartbeatSigner, proof?: ProofFields): Uint8Array {
  const encoded = encodeMessage(type, message);
  return signer ? signer.seal(encoded, proof) : encoded;
}

interface CheckedCertificate {
  role: string;
  id: string;
  publicKey: KeyObject;
  validFrom: number;
  validTo: number;
}

export class HeartbeatVerifier {
  private authorities: X509Certificate[] = [];
  private readonly checked = new Map<string, CheckedCertificate | string>();

  /** `caPem`: one or more CA certificates (during a CA rotation, both). */
  constructor(
    caPem: Buffer | string,
    private readonly now: () => number = Date.now,
  ) {
    this.trust(caPem);
  }

  /** Verifies against these CA certificates from now on (a renewed bundle); throws, keeping the old, if none reads. */
  trust(caPem: Buffer | string): void {
    const authorities = splitPem(caPem.toString()).map((pem) => new X509Certificate(pem));
    if (authorities.length === 0) throw new Error("no CA certificate to verify heartbeats with");
    this.authorities = authorities;
    // What was checked against the old CAs is checked again.
    this.checked.clear();
  }

  /** Why `raw` (the bytes that arrived, decoded as `hb`) must not be believed; undefined if it may. */
  problem(hb: control.Heartbeat, raw: Uint8Array): string | undefined {
    const role = roleNameOf(hb.role);
    return this.currentProblem(
      raw,
      "heartbeat",
      HEARTBEAT_PROOF,
      (cert) =>
        cert.role !== role || cert.id !== hb.id
          ? `signed by ${cert.role}/${cert.id}, but speaks for ${role ?? "an unknown role"}/${hb.id}`
          : undefined,
      ["sent at", Number(hb.sentAtUnixMs)],
    );
  }

  /**
   * Why a job item's result (`raw`, decoded as `result`) must not be counted; undefined if it may. It must be
   * sealed by the backend it names, with a certificate that was valid when it says the item was done. A result is
   * a record read long after it was written, so its certificate may have expired since; a done time ahead of the
   * reader's clock is refused (it would let an expired certificate sign for "now").
   */
  jobResultProblem(result: control.JobItemResult, raw: Uint8Array): string | undefined {
    const sealed = this.unseal(raw, "job result", HEARTBEAT_PROOF);
    if (typeof sealed === "string") return sealed;
    const { cert } = sealed;
    if (cert.role !== "backend" || cert.id !== result.backendId)
      return `signed by ${cert.role}/${cert.id}, but names backend ${JSON.stringify(result.backendId)}`;
    if (!sealed.signatureHolds()) return "its signature does not match its content";
    const doneAt = Number(result.doneAtUnixMs);
    if (!(doneAt <= this.now() + HEARTBEAT_MAX_SKEW_MS)) return `done at ${doneAt}, ahead of this reader's clock`;
    if (!(doneAt >= cert.validFrom - HEARTBEAT_MAX_SKEW_MS && doneAt <= cert.validTo + HEARTBEAT_MAX_SKEW_MS))
      return "its certificate was not valid when it says the item was done";
    return undefined;
  }

  /**
   * Why a frontend's load report (`raw`, decoded as `report`) must not be counted; undefined if it may. It must be
   * sealed by the frontend it names, and its window must have ended within HEARTBEAT_MAX_SKEW_MS of the reader's
   * clock (its end is when it was sent): a report names a rate the slow loop plans from.
   */
  loadReportProblem(report: control.LoadReport, raw: Uint8Array): string | undefined {
    return this.currentProblem(
      raw,
      "load report",
      LOAD_REPORT_PROOF,
      (cert) =>
        cert.role !== "frontend" || cert.id !== report.frontendId
          ? `signed by ${cert.role}/${cert.id}, but speaks for frontend ${JSON.stringify(report.frontendId)}`
          : undefined,
      ["its window ends at", Number(report.windowEndUnixMs)],
    );
  }

  /**
   * What a message about now (a heartbeat, a load report) must pass: sealed with a certificate of the CA valid now,
   * naming its sender (`speaksFor`: why not), its signature holding, and sent within HEARTBEAT_MAX_SKEW_MS of the
   * reader's clock (a captured one can only be repeated, and not for long).
   */
  private currentProblem(
    raw: Uint8Array,
    what: string,
    proof: ProofFields,
    speaksFor: (cert: CheckedCertificate) => string | undefined,
    [sentLabel, sentAt]: [string, number],
  ): string | undefined {
    const sealed = this.unseal(raw, what, proof);
    if (typeof sealed === "string") return sealed;
    const { cert } = sealed;
    const now = this.now();
    // The same skew as for send times: a certificate issued a moment ago on a node whose clock runs ahead is good.
    if (now < cert.validFrom - HEARTBEAT_MAX_SKEW_MS || now > cert.validTo + HEARTBEAT_MAX_SKEW_MS)
      return "its certificate is not valid now";
    const identity = speaksFor(cert);
    if (identity !== undefined) return identity;
    if (!sealed.signatureHolds()) return "its signature does not match its content";
    if (!(Math.abs(now - sentAt) <= HEARTBEAT_MAX_SKEW_MS))
      return `${sentLabel} ${sentAt}, ${now - sentAt} ms from now (a replay or a bad clock)`;
    return undefined;
  }

  /** The certificate that sealed `raw` (checked against the CAs) and a check of its signature; or why there is none. */
  private unseal(raw: Uint8Array, what: string, proof: ProofFields): { cert: CheckedCertificate; signatureHolds(): boolean } | string {
    let parts: ReturnType<typeof splitFields>;
    try {
      parts = splitFields(raw, new Set([proof.certificate, proof.signature]));
    } catch (err) {
      return `not a ${what}: ${err instanceof Error ? err.message : String(err)}`;
    }
    const der = parts.taken.get(proof.certificate);
    const signature = parts.taken.get(proof.signature);
    if (!der || der.length === 0 || !signature || signature.length === 0) return "unsigned (no certificate or no signature)";
    const cert = this.certificate(der);
    if (typeof cert === "string") return cert;
    // The signature is checked last, by the caller: cheaper refusals (wrong identity) come first.
    return { cert, signatureHolds: () => verify("sha256", parts.rest, cert.publicKey, signature) };
  }

  private certificate(der: Uint8Array): CheckedCertificate | string {
    const key = createHash("sha256").update(der).digest("hex");
    const known = this.checked.get(key);
    if (known !== undefined) return known;
    const result = this.check(der);
    // Refusals are remembered too: a flood of one bad certificate costs one chain check.
    if (this.checked.size >= MAX_CACHED_CERTIFICATES) this.checked.clear();
    this.checked.set(key, result);
    return result;
  }

  private check(der: Uint8Array): CheckedCertificate | string {
    let cert: X509Certificate;
    try {
      cert = new X509Certificate(der);
    } catch {
      return "its certificate cannot be read";
    }
    if (!this.authorities.some((ca) => cert.checkIssued(ca) && cert.verify(ca.publicKey)))
      return "its certificate is not from the cluster's CA";
    const identity = identityFromSubjectAltName(cert.subjectAltName);
    if (!identity) return "its certificate names no spiffe://infergrid/<role>/<id> identity";
    return {
      ...identity,
      publicKey: cert.publicKey,
      validFrom: Date.parse(cert.validFrom),
      validTo: Date.parse(cert.validTo),
    };
  }
}

function splitPem(text: string): string[] {
  return text.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
}
