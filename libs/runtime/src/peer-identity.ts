import { grpc } from "./grpc.js";

/**
 * Who is calling, from the caller's TLS client certificate: its URI subject alternative name
 * `spiffe://infergrid/<role>/<id>` (the SPIFFE form, which cert-manager and SPIRE issue). Servers started with
 * --grpc-peer-roles refuse calls from roles a method does not admit (docs/security.md).
 */
export interface PeerIdentity {
  role: string;
  id: string;
}

export const IDENTITY_URI_PREFIX = "spiffe://infergrid/";
const TOKEN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

/** The identity in a certificate's subjectaltname ("DNS:a, URI:spiffe://infergrid/frontend/frontend-0"); undefined if none or several. */
export function identityFromSubjectAltName(san: string | undefined): PeerIdentity | undefined {
  if (!san) return undefined;
  const found: PeerIdentity[] = [];
  for (const entry of san.split(",")) {
    const value = entry.trim();
    if (!value.startsWith(`URI:${IDENTITY_URI_PREFIX}`)) continue;
    const [role, id, ...rest] = value.slice(4 + IDENTITY_URI_PREFIX.length).split("/");
    if (role === undefined || id === undefined || rest.length > 0 || !TOKEN.test(role) || !TOKEN.test(id)) return undefined;
    found.push({ role, id });
  }
  // Two identities in one certificate is one too many to trust either.
  return found.length === 1 ? found[0] : undefined;
}

/** The caller's identity on a call (undefined without TLS, without a client certificate, or without an identity URI). */
export function peerIdentity(call: { getAuthContext(): { sslPeerCertificate?: { subjectaltname?: string } } }): PeerIdentity | undefined {
  return identityFromSubjectAltName(call.getAuthContext().sslPeerCertificate?.subjectaltname);
}

/** Why a caller may not call a method admitting `roles`, or undefined if it may. */
export function peerRoleProblem(identity: PeerIdentity | undefined, roles: readonly string[], method: string): string | undefined {
  if (!identity) return `${method} needs a client certificate with a ${IDENTITY_URI_PREFIX}<role>/<id> identity`;
  if (!roles.includes(identity.role)) return `${method} is not for ${identity.role} ${identity.id} (only ${roles.join(", ")})`;
  return undefined;
}

/**
 * A unary handler that first checks the caller's role (when `enforce`): UNAUTHENTICATED without an identity,
 * PERMISSION_DENIED with another role; the handler never runs for either.
 */
export function requirePeerRole<Req, Res>(
  enforce: boolean,
  roles: readonly string[],
  method: string,
  handler: grpc.handleUnaryCall<Req, Res>,
): grpc.handleUnaryCall<Req, Res> {
  if (!enforce) return handler;
  return (call, callback) => {
    const identity = peerIdentity(call);
    const problem = peerRoleProblem(identity, roles, method);
    if (problem === undefined) return handler(call, callback);
    callback({
      code: identity ? grpc.status.PERMISSION_DENIED : grpc.status.UNAUTHENTICATED,
      details: problem,
      metadata: new grpc.Metadata(),
    });
  };
}
