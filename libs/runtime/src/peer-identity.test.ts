import { describe, expect, it } from "vitest";
import { grpc } from "./grpc.js";
import { identityFromSubjectAltName, peerRoleProblem, requirePeerRole } from "./peer-identity.js";

describe("identityFromSubjectAltName", () => {
  it("reads the one spiffe://infergrid/<role>/<id> URI among the names", () => {
    expect(identityFromSubjectAltName("IP Address:127.0.0.1, DNS:x, URI:spiffe://infergrid/frontend/frontend-0")).toEqual({
      role: "frontend",
      id: "frontend-0",
    });
  });
  it("trusts nothing ambiguous or malformed", () => {
    expect(identityFromSubjectAltName(undefined)).toBeUndefined();
    expect(identityFromSubjectAltName("DNS:x")).toBeUndefined();
    expect(identityFromSubjectAltName("URI:spiffe://other/frontend/f")).toBeUndefined();
    expect(identityFromSubjectAltName("URI:spiffe://infergrid/frontend")).toBeUndefined();
    expect(identityFromSubjectAltName("URI:spiffe://infergrid/frontend/f/extra")).toBeUndefined();
    expect(identityFromSubjectAltName("URI:spiffe://infergrid/front end/f")).toBeUndefined();
    expect(identityFromSubjectAltName("URI:spiffe://infergrid/frontend/a, URI:spiffe://infergrid/admin/b")).toBeUndefined();
  });
});

describe("requirePeerRole", () => {
  const call = (san?: string) => ({ getAuthContext: () => (san === undefined ? {} : { sslPeerCertificate: { subjectaltname: san } }) });
  const run = (enforce: boolean, san?: string) => {
    let ran = false;
    let status: grpc.status | undefined;
    let details = "";
    const handler = requirePeerRole<object, object>(enforce, ["frontend"], "Execute", (_c, cb) => {
      ran = true;
      cb(null, {});
    });
    handler(call(san) as unknown as grpc.ServerUnaryCall<object, object>, (err) => {
      status = err?.code ?? grpc.status.OK;
      details = err?.details ?? "";
    });
    return { ran, status, details };
  };
  it("runs the handler for an admitted role, and always when not enforced", () => {
    expect(run(true, "URI:spiffe://infergrid/frontend/f0")).toEqual({ ran: true, status: grpc.status.OK, details: "" });
    expect(run(false)).toEqual({ ran: true, status: grpc.status.OK, details: "" });
  });
  it("refuses another role (PERMISSION_DENIED) and no identity (UNAUTHENTICATED) without running the handler", () => {
    expect(run(true, "URI:spiffe://infergrid/broker/b")).toEqual({
      ran: false,
      status: grpc.status.PERMISSION_DENIED,
      details: "Execute is not for broker b (only frontend)",
    });
    expect(run(true)).toMatchObject({ ran: false, status: grpc.status.UNAUTHENTICATED });
    expect(peerRoleProblem(undefined, ["admin"], "RegisterService")).toBe(
      "RegisterService needs a client certificate with a spiffe://infergrid/<role>/<id> identity",
    );
  });
});
