import { createPrivateKey, X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { createSecureContext } from "node:tls";
import type { grpc } from "./grpc.js";
import type { Logger } from "./logger.js";
import type { GrpcTls } from "./security.js";

/**
 * The process's gRPC certificate, key and CA, read again from their files while it runs: cert-manager renews a
 * pod's certificate files in place (docs/security.md), and a process that read them only at start-up presented
 * an expired certificate once it outlived it. Each new connection, served or dialled, takes the material in use
 * when it is made; connections already open keep theirs (TLS does not change a connection's certificate).
 *
 * New files are taken only once they make a whole: a certificate and a key that belong together, a CA that
 * reads, and Node accepts the three. Files caught half-written by a renewal (a new certificate beside the old key)
 * are passed over, and the material in use stays until the next read finds them whole.
 *
 * Written by hand beside grpc-js's FileWatcherCertificateProvider, which hands on whatever it read: on a
 * half-written renewal its server drops every new connection until the files are whole again. This one is
 * also what the request path's own channels (h2-channel.ts) and the heartbeat signer read.
 */
export interface TlsFiles {
  certFile: string;
  keyFile: string;
  caFile: string;
}

/** The material in use: all three read (GrpcTls with none of them missing). */
type Material = GrpcTls & { cert: Buffer; key: Buffer; ca: Buffer };

type CaListener = (update: grpc.experimental.CaCertificateUpdate | null) => void;
type IdentityListener = (update: grpc.experimental.IdentityCertificateUpdate | null) => void;

/** Why a certificate, key and CA cannot serve together; undefined when they can. */
export function tlsMaterialProblem(material: { cert: Buffer; key: Buffer; ca: Buffer }): string | undefined {
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(material.cert);
  } catch {
    return "the certificate file holds no certificate that can be read";
  }
  let key: ReturnType<typeof createPrivateKey>;
  try {
    key = createPrivateKey(material.key);
  } catch {
    return "the key file holds no private key that can be read";
  }
  if (!cert.checkPrivateKey(key)) return "the key is not the certificate's (a renewal half-written?)";
  if (!/-----BEGIN CERTIFICATE-----/.test(material.ca.toString())) return "the CA file holds no certificate";
  try {
    createSecureContext({ cert: material.cert, key: material.key, ca: material.ca });
  } catch (err) {
    return `Node refuses them: ${err instanceof Error ? err.message : String(err)}`;
  }
  return undefined;
}

export class ReloadingTls implements grpc.experimental.CertificateProvider {
  private material: Material;
  private readonly changes = new Set<(tls: GrpcTls) => void>();
  private readonly caListeners = new Set<CaListener>();
  private readonly identityListeners = new Set<IdentityListener>();
  private timer: NodeJS.Timeout | undefined;
  private lastProblem = "";

  /** `initial`: the material read and checked at start-up (security.ts), from `files`. */
  constructor(
    private readonly files: TlsFiles,
    initial: GrpcTls,
    private readonly logger?: Logger,
  ) {
    if (!initial.cert || !initial.key || !initial.ca) throw new Error("gRPC TLS needs a certificate, its key and a CA");
    this.material = { ...initial, cert: initial.cert, key: initial.key, ca: initial.ca };
  }

  /** The material new connections take now. */
  get current(): Material {
    return this.material;
  }

  /** Reads the files every `intervalMs` (0: never) until stop(). */
  start(intervalMs: number): this {
    this.stop();
    if (intervalMs > 0) {
      this.timer = setInterval(() => this.refresh(), intervalMs);
      this.timer.unref();
    }
    return this;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Reads the files; takes them if they differ from the material in use and make a whole. True if taken. */
  refresh(): boolean {
    let read: { cert: Buffer; key: Buffer; ca: Buffer };
    try {
      read = { cert: readFileSync(this.files.certFile), key: readFileSync(this.files.keyFile), ca: readFileSync(this.files.caFile) };
    } catch (err) {
      this.passOver(`cannot read them (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
      return false;
    }
    const m = this.material;
    if (read.cert.equals(m.cert) && read.key.equals(m.key) && read.ca.equals(m.ca)) {
      this.lastProblem = "";
      return false;
    }
    const problem = tlsMaterialProblem(read);
    if (problem !== undefined) {
      this.passOver(problem);
      return false;
    }
    this.lastProblem = "";
    this.material = { ...m, ...read };
    const cert = new X509Certificate(read.cert);
    this.logger?.info(
      { subjectAltName: cert.subjectAltName, validTo: cert.validTo, serialNumber: cert.serialNumber },
      "gRPC TLS files changed: new connections take the new certificate",
    );
    for (const l of this.identityListeners) l({ certificate: read.cert, privateKey: read.key });
    for (const l of this.caListeners) l({ caCertificate: read.ca });
    for (const c of this.changes) {
      try {
        c(this.material);
      } catch (err) {
        // A reader that cannot take the new material keeps what it had; the others still get it.
        this.logger?.error({ err }, "a reader of the gRPC TLS material refused the renewed files");
      }
    }
    return true;
  }

  /** Called with the new material each time it is taken; returns the unsubscribe. */
  onChange(listener: (tls: GrpcTls) => void): () => void {
    this.changes.add(listener);
    return () => this.changes.delete(listener);
  }

  private passOver(problem: string): void {
    // Once per distinct problem: a renewal caught half-way is normal, a broken file is said once, not every read.
    if (problem !== this.lastProblem) {
      this.logger?.warn({ problem, files: this.files }, "gRPC TLS files not taken; the certificate in use stays");
    }
    this.lastProblem = problem;
  }

  // grpc-js's CertificateProvider: its credentials ask for the material when a server or channel first uses them.
  addCaCertificateListener(listener: CaListener): void {
    this.caListeners.add(listener);
    process.nextTick(listener, { caCertificate: this.material.ca });
  }

  removeCaCertificateListener(listener: CaListener): void {
    this.caListeners.delete(listener);
  }

  addIdentityCertificateListener(listener: IdentityListener): void {
    this.identityListeners.add(listener);
    process.nextTick(listener, { certificate: this.material.cert, privateKey: this.material.key });
  }

  removeIdentityCertificateListener(listener: IdentityListener): void {
    this.identityListeners.delete(listener);
  }
}
