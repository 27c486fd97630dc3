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

  it("uses a reloaded file from the next request on", () => {
    const a = auth();
    const rotated = newClientToken();
    a.replace(parseClientTokens(`alpha sha256:${sha(rotated)}\n`));
    expect(a.authenticate(`Bearer ${TOKEN_A}`)).toMatchObject({ ok: false, reason: "unknown" });
    expect(a.authenticate(`Bearer ${rotated}`)).toMatchObject({ ok: true, client: "alpha" });
    expect(a.clients).toEqual(["alpha"]);
  });
});
