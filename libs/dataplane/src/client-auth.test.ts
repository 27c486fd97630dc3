import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  ClientAuthenticator,
  ClientTokensError,
  clientTokenLine,
  MAX_PRESENTED_TOKEN_CHARS,
  newClientToken,
  parseClientTokens,
  readClientTokensFile,
} from "./client-auth.js";

const sha = (s: string) => createHash("sha256").update(s, "utf8").digest("hex");
const TOKEN_A = newClientToken();
const TOKEN_B = newClientToken();
const FILE = `# clients of the broker\n\nalpha sha256:${sha(TOKEN_A)}\r\n  beta\tsha256:${sha(TOKEN_B)}  \n`;

describe("parseClientTokens", () => {
  it("reads names and hashes, skipping blank and comment lines, with CRLF and tabs", () => {
    const t = parseClientTokens(FILE);
    expect(t.clients).toEqual(["alpha", "beta"]);
    expect(t.byDigest.get(sha(TOKEN_A))?.client).toBe("alpha");
    expect(t.byDigest.get(sha(TOKEN_B))?.client).toBe("beta");
    expect(t.byDigest.size).toBe(2);
  });

  it("lets one client hold several tokens (rotation)", () => {
    const t = parseClientTokens(`alpha sha256:${sha("old")}\nalpha sha256:${sha("new")}\n`);
    expect(t.clients).toEqual(["alpha"]);
    expect(t.byDigest.size).toBe(2);
  });

  it("accepts a file with no client (nobody is admitted by token)", () => {
    expect(parseClientTokens("# none yet\n\n").clients).toEqual([]);
  });

  const bad: [string, string, RegExp][] = [
    ["one field", "alpha\n", /f line 1: expected/],
    ["three fields", `alpha sha256:${sha("x")} extra\n`, /f line 1: expected/],
    ["a bad name", `-alpha sha256:${sha("x")}\n`, /f line 1: client name "-alpha"/],
    ["a name too long", `${"a".repeat(129)} sha256:${sha("x")}\n`, /f line 1: client name/],
    ["uppercase hex", `alpha sha256:${sha("x").toUpperCase()}\n`, /f line 1: the second field must be sha256:/],
    ["a short hash", `alpha sha256:${sha("x").slice(1)}\n`, /f line 1: the second field/],
    ["no sha256: prefix", `alpha ${sha("x")}\n`, /f line 1: the second field/],
    ["the same token twice", `# c\nalpha sha256:${sha("x")}\nbeta sha256:${sha("x")}\n`, /f line 3: the same token hash as line 2/],
  ];
  for (const [what, text, message] of bad) {
    it(`refuses ${what}, naming the line`, () => {
      expect(() => parseClientTokens(text, "f")).toThrow(ClientTokensError);
      expect(() => parseClientTokens(text, "f")).toThrow(message);
    });
  }

  it("reads a client's services, on a token's line or a line of their own", () => {
    const t = parseClientTokens(
      `alpha sha256:${sha("a1")} services=ocr,ocr-large\nalpha sha256:${sha("a2")}\nbeta sha256:${sha("b")}\ncert-client services=ocr\n`,
    );
    expect(t.clients).toEqual(["alpha", "beta", "cert-client"]);
    expect(t.byDigest.size).toBe(3);
    expect([...(t.grants.get("alpha") ?? [])]).toEqual(["ocr", "ocr-large"]);
    expect([...(t.grants.get("cert-client") ?? [])]).toEqual(["ocr"]);
    expect(t.grants.has("beta")).toBe(false);
    // The same list on each of a client's lines, in any order.
    expect(parseClientTokens(`alpha sha256:${sha("1")} services=b,a\nalpha services=a,b\n`).grants.get("alpha")?.size).toBe(2);
  });

  const badGrants: [string, string, RegExp][] = [
    ["an empty list", `alpha sha256:${sha("x")} services=\n`, /f line 1: service name ""/],
    ["a service the registry could not hold", `alpha services=OCR\n`, /f line 1: service name "OCR"/],
    ["two lists on a line", `alpha services=a services=b\n`, /f line 1: expected/],
    ["two hashes on a line", `alpha sha256:${sha("x")} sha256:${sha("y")}\n`, /f line 1: expected/],
    [
      "lists that differ",
      `alpha services=a\n\nalpha sha256:${sha("x")} services=a,b\n`,
      /f line 3: alpha's services differ from those of line 1/,
    ],
  ];
  for (const [what, text, message] of badGrants) {
    it(`refuses ${what}, naming the line`, () => {
      expect(() => parseClientTokens(text, "f")).toThrow(message);
    });
  }

  it("never echoes a token pasted in place of its hash", () => {
    const token = newClientToken();
    let message = "";
    try {
      parseClientTokens(`alpha ${token}\n`);
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/line 1/);
    expect(message).not.toContain(token);
  });

  it("reads a file from disk, and names the file when it cannot", () => {
    const dir = mkdtempSync(join(tmpdir(), "client-auth-"));
    try {
      writeFileSync(join(dir, "tokens"), FILE);
      expect(readClientTokensFile(join(dir, "tokens")).clients).toEqual(["alpha", "beta"]);
      expect(() => readClientTokensFile(join(dir, "missing"))).toThrow(/cannot read .*missing \(ENOENT\)/);
      writeFileSync(join(dir, "bad"), "alpha nothash\n");
      expect(() => readClientTokensFile(join(dir, "bad"))).toThrow(`${join(dir, "bad")} line 1`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("clientTokenLine and newClientToken", () => {
  it("makes 43-character base64url tokens, each new, whose line the parser reads back", () => {
    const tokens = Array.from({ length: 50 }, () => newClientToken());
    expect(new Set(tokens).size).toBe(50);
    for (const t of tokens) expect(t).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const line = clientTokenLine("svc-client.1", tokens[0] ?? "");
    expect(line).toBe(`svc-client.1 sha256:${sha(tokens[0] ?? "")}`);
    expect(new ClientAuthenticator(parseClientTokens(line)).authenticate(`Bearer ${tokens[0]}`)).toEqual({
      ok: true,
      client: "svc-client.1",
      via: "token",
    });
  });

  it("refuses a name the file could not hold", () => {
    expect(() => clientTokenLine("has space", "t")).toThrow(ClientTokensError);
    expect(() => clientTokenLine("alpha", "t", ["No Such"])).toThrow(/service name "No Such"/);
  });

  it("writes the services a client may call, which the parser reads back", () => {
    const line = clientTokenLine("alpha", "t", ["ocr", "asr"]);
    expect(line).toBe(`alpha sha256:${sha("t")} services=ocr,asr`);
    const a = new ClientAuthenticator(parseClientTokens(line));
    expect([a.mayCall("alpha", "ocr"), a.mayCall("alpha", "asr"), a.mayCall("alpha", "llm")]).toEqual([true, true, false]);
  });
});

describe("ClientAuthenticator", () => {
  const auth = () => new ClientAuthenticator(parseClientTokens(FILE));

  it("admits each known token as its own client", () => {
    expect(auth().authenticate(`Bearer ${TOKEN_A}`)).toMatchObject({ ok: true, client: "alpha" });
    expect(auth().authenticate([`bearer ${TOKEN_B}`])).toMatchObject({ ok: true, client: "beta" });
  });

  it("refuses a missing, malformed, doubled or unknown token", () => {
    const a = auth();
    expect(a.authenticate(undefined)).toMatchObject({ ok: false, reason: "missing" });
    expect(a.authenticate([])).toMatchObject({ ok: false, reason: "missing" });
    expect(a.authenticate(TOKEN_A)).toMatchObject({ ok: false, reason: "malformed" });
    expect(a.authenticate(`Basic ${TOKEN_A}`)).toMatchObject({ ok: false, reason: "malformed" });
    expect(a.authenticate("Bearer ")).toMatchObject({ ok: false, reason: "malformed" });
    expect(a.authenticate(`Bearer ${TOKEN_A} x`)).toMatchObject({ ok: false, reason: "malformed" });
    expect(a.authenticate([`Bearer ${TOKEN_A}`, `Bearer ${TOKEN_A}`])).toMatchObject({ ok: false, reason: "malformed" });
    expect(a.authenticate(`Bearer ${newClientToken()}`)).toMatchObject({ ok: false, reason: "unknown" });
    // The hash itself is not a token.
    expect(a.authenticate(`Bearer ${sha(TOKEN_A)}`)).toMatchObject({ ok: false, reason: "unknown" });
    expect(a.authenticate(`Bearer ${"a".repeat(MAX_PRESENTED_TOKEN_CHARS + 1)}`)).toMatchObject({ ok: false, reason: "unknown" });
  });

  it("admits no token but the listed ones, whatever is presented", () => {
    const a = auth();
    fc.assert(
      fc.property(fc.string({ maxLength: 80 }), (s) => {
        const d = a.authenticate(`Bearer ${s}`);
        if (d.ok) expect([TOKEN_A, TOKEN_B]).toContain(s.trim());
      }),
    );
  });

  it("takes a certificate's client when no token is presented, but a presented token decides", () => {
    const a = auth();
    expect(a.authenticate(undefined, "gamma")).toEqual({ ok: true, client: "gamma", via: "certificate" });
    expect(a.authenticate(`Bearer ${TOKEN_A}`, "gamma")).toMatchObject({ ok: true, client: "alpha", via: "token" });
    expect(a.authenticate(`Bearer ${newClientToken()}`, "gamma")).toMatchObject({ ok: false, reason: "unknown" });
  });

  it("lets a client with a services= list call those only, and one without call every service", () => {
    const a = new ClientAuthenticator(
      parseClientTokens(`alpha sha256:${sha(TOKEN_A)} services=ocr\nbeta sha256:${sha(TOKEN_B)}\ngamma services=asr\n`),
    );
    expect([a.mayCall("alpha", "ocr"), a.mayCall("alpha", "asr")]).toEqual([true, false]);
    expect([a.mayCall("beta", "ocr"), a.mayCall("beta", "asr")]).toEqual([true, true]);
    // A client by certificate has the list its name has in the file.
    expect(a.authenticate(undefined, "gamma")).toMatchObject({ ok: true, client: "gamma" });
    expect([a.mayCall("gamma", "asr"), a.mayCall("gamma", "ocr")]).toEqual([true, false]);
    // A line of services alone is no token.
    expect(a.authenticate("Bearer services=asr")).toMatchObject({ ok: false });
    expect(a.authenticate("Bearer asr")).toMatchObject({ ok: false, reason: "unknown" });
    // Lists follow a reload.
    a.replace(parseClientTokens(`alpha sha256:${sha(TOKEN_A)} services=asr\n`));
    expect([a.mayCall("alpha", "ocr"), a.mayCall("alpha", "asr")]).toEqual([false, true]);
  });

  it("uses a reloaded file from the next request on", () => {
    const a = auth();
    const rotated = newClientToken();
    a.replace(parseClientTokens(`alpha sha256:${sha(rotated)}\n`));
    expect(a.authenticate(`Bearer ${TOKEN_A}`)).toMatchObject({ ok: false, reason: "unknown" });
    expect(a.authenticate(`Bearer ${rotated}`)).toMatchObject({ ok: true, client: "alpha" });
    expect(a.clients).toEqual(["alpha"]);
  });
});
