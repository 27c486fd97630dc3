import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import { serviceNameProblem } from "@infergrid/control-plane";

/**
 * Client authentication at the broker: a tokens file names each client and the SHA-256 of its bearer token(s),
 * never a token, so a leaked config does not leak a credential. A presented token is hashed and looked up by
 * its digest; the digests are then compared with timingSafeEqual. A client may hold several tokens at once,
 * which is how a token is rotated without refusing the client in between.
 *
 * File format, UTF-8, one line per token or grant; blank lines and lines starting with `#` are skipped:
 *   <client-name> sha256:<64 lowercase hex chars of SHA-256 of the token> [services=<service>[,<service>...]]
 *   <client-name> services=<service>[,<service>...]
 * A client with a `services=` list may call those services only (the second form restricts a client that
 * authenticates by its certificate, or states a client's list once for all its tokens); one without may call
 * every service. Every line of a client that names services must name the same ones.
 */
export const CLIENT_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
const HASH = /^sha256:([0-9a-f]{64})$/;
const SERVICES = "services=";
/**
 * Longer presented tokens are refused unhashed: ours are 43 characters, and an unauthenticated flood should
 * not be able to make each refusal cost more than a short hash.
 */
export const MAX_PRESENTED_TOKEN_CHARS = 512;

export class ClientTokensError extends Error {
  override readonly name = "ClientTokensError";
}

export interface ClientTokens {
  /** Hex digest -> the client holding the token, and the digest's bytes. */
  readonly byDigest: ReadonlyMap<string, { client: string; digest: Buffer }>;
  /** Distinct client names, in file order. */
  readonly clients: readonly string[];
  /** Client -> the services it may call; a client not in it may call every service. */
  readonly grants: ReadonlyMap<string, ReadonlySet<string>>;
}

/** The digest the tokens file holds for `token`. */
export function tokenDigest(token: string): Buffer {
  return createHash("sha256").update(token, "utf8").digest();
}

/** A fresh random token: 32 bytes, base64url (43 characters, no padding). */
export function newClientToken(): string {
  return randomBytes(32).toString("base64url");
}

/** The tokens file's line for a client holding `token`, limited to `services` when given. */
export function clientTokenLine(name: string, token: string, services?: readonly string[]): string {
  if (!CLIENT_NAME.test(name)) throw new ClientTokensError(`client name ${JSON.stringify(name)} must match ${CLIENT_NAME.source}`);
  for (const service of services ?? []) {
    const problem = serviceNameProblem(service);
    if (problem) throw new ClientTokensError(problem);
  }
  const grant = services === undefined ? "" : ` ${SERVICES}${services.join(",")}`;
  return `${name} sha256:${tokenDigest(token).toString("hex")}${grant}`;
}

/** Parses a tokens file; ClientTokensError names the line at fault (`source`: the file's name, for the message). */
export function parseClientTokens(text: string, source = "tokens file"): ClientTokens {
  const byDigest = new Map<string, { client: string; digest: Buffer }>();
  const lineOf = new Map<string, number>();
  const clients: string[] = [];
  const grants = new Map<string, { services: Set<string>; line: number }>();
  const lines = text.replace(/^\uFEFF/, "").split(/\r?\n/);
  lines.forEach((raw, i) => {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) return;
    const at = `${source} line ${i + 1}`;
    const [name = "", ...fields] = line.split(/[ \t]+/);
    const listed = fields.filter((f) => f.startsWith(SERVICES));
    const hashes = fields.filter((f) => !f.startsWith(SERVICES));
    if (fields.length === 0 || fields.length > 2 || listed.length > 1 || hashes.length > 1)
      throw new ClientTokensError(
        `${at}: expected "<client-name> sha256:<64 hex chars> [services=<service>,...]" or "<client-name> services=<service>,..."`,
      );
    if (!CLIENT_NAME.test(name)) throw new ClientTokensError(`${at}: client name ${JSON.stringify(name)} must match ${CLIENT_NAME.source}`);
    const [hash] = hashes;
    if (hash !== undefined) {
      const digest = HASH.exec(hash)?.[1];
      // The token itself pasted in place of its hash is the likeliest mistake: the message must not echo it.
      if (digest === undefined) throw new ClientTokensError(`${at}: the second field must be sha256:<64 lowercase hex chars>`);
      const first = lineOf.get(digest);
      if (first !== undefined) throw new ClientTokensError(`${at}: the same token hash as line ${first}`);
      byDigest.set(digest, { client: name, digest: Buffer.from(digest, "hex") });
      lineOf.set(digest, i + 1);
    }
    const [list] = listed;
    if (list !== undefined) {
      const services = list.slice(SERVICES.length).split(",");
      for (const service of services) {
        const problem = serviceNameProblem(service);
        if (problem) throw new ClientTokensError(`${at}: ${problem}`);
      }
      const granted = new Set(services);
      const before = grants.get(name);
      if (before && (before.services.size !== granted.size || services.some((x) => !before.services.has(x))))
        throw new ClientTokensError(`${at}: ${name}'s services differ from those of line ${before.line}`);
      if (!before) grants.set(name, { services: granted, line: i + 1 });
    }
    if (!clients.includes(name)) clients.push(name);
  });
  return { byDigest, clients, grants: new Map([...grants].map(([client, g]) => [client, g.services])) };
}

/** Reads and parses a tokens file; ClientTokensError names the file and the line (or why it cannot be read). */
export function readClientTokensFile(path: string): ClientTokens {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new ClientTokensError(`cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? "unreadable"})`);
  }
  return parseClientTokens(text, path);
}

export type AuthDecision =
  | { ok: true; client: string; via: "token" | "certificate" }
  | { ok: false; reason: "missing" | "malformed" | "unknown"; message: string };

/**
 * Decides who a request comes from. `authorization`: the values of the Authorization header (HTTP) or the
 * `authorization` metadata key (gRPC), as many as came; `certificateClient`: the client name of the caller's
 * verified TLS certificate (`spiffe://infergrid/client/<name>`), if any. A presented token decides (a wrong
 * one is refused even with a good certificate: what is presented is what is checked); without one, the
 * certificate does.
 */
export class ClientAuthenticator {
  constructor(private tokens: ClientTokens) {}

  /** Swaps in a reloaded tokens file; requests decided after this use it. */
  replace(tokens: ClientTokens): void {
    this.tokens = tokens;
  }

  get clients(): readonly string[] {
    return this.tokens.clients;
  }

  /** Whether `client` (an authenticated name) may call `service`: its `services=` list, or every service. */
  mayCall(client: string, service: string): boolean {
    const granted = this.tokens.grants.get(client);
    return granted === undefined || granted.has(service);
  }

  authenticate(authorization: string | readonly string[] | undefined, certificateClient?: string): AuthDecision {
    const values = authorization === undefined ? [] : typeof authorization === "string" ? [authorization] : authorization;
    if (values.length === 0) {
      if (certificateClient !== undefined && CLIENT_NAME.test(certificateClient))
        return { ok: true, client: certificateClient, via: "certificate" };
      return { ok: false, reason: "missing", message: "this broker needs a client token: authorization: Bearer <token>" };
    }
    if (values.length > 1) return { ok: false, reason: "malformed", message: "more than one authorization value" };
    // RFC 6750: the scheme is case-insensitive; the token is one b64token.
    const token = /^bearer +([A-Za-z0-9\-._~+/]+=*) *$/i.exec(values[0] ?? "")?.[1];
    if (token === undefined) return { ok: false, reason: "malformed", message: "authorization must be: Bearer <token>" };
    if (token.length > MAX_PRESENTED_TOKEN_CHARS) return { ok: false, reason: "unknown", message: "unknown client token" };
    // Looked up by the token's digest, so the lookup's timing can tell at most about a digest, which gives no
    // way back to a token; the final word is a constant-time comparison of the bytes all the same.
    const presented = tokenDigest(token);
    const entry = this.tokens.byDigest.get(presented.toString("hex"));
    if (entry === undefined || !timingSafeEqual(presented, entry.digest)) {
      return { ok: false, reason: "unknown", message: "unknown client token" };
    }
    return { ok: true, client: entry.client, via: "token" };
  }
}
