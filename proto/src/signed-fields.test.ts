import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { control } from "./index.js";
import { appendBytesFields, splitFields } from "./signed-fields.js";

const PROOF = new Set([10, 11]);

const heartbeat = fc.record({
  role: fc.constantFrom(control.Role.ROLE_FRONTEND, control.Role.ROLE_BACKEND, control.Role.ROLE_BROKER),
  id: fc.string({ maxLength: 40 }),
  address: fc.string({ maxLength: 40 }),
  startedAtUnixMs: fc.nat(),
  sentAtUnixMs: fc.nat(),
  seq: fc.nat(),
  draining: fc.boolean(),
  instanceType: fc.string({ maxLength: 10 }),
});

describe("signed fields (appended proof, taken back without re-encoding)", () => {
  it("gives back exactly the bytes that were signed and the appended values, and decodes as the message with them", () => {
    fc.assert(
      fc.property(
        heartbeat,
        fc.uint8Array({ minLength: 1, maxLength: 300 }),
        fc.uint8Array({ minLength: 1, maxLength: 80 }),
        (hb, cert, sig) => {
          const encoded = control.Heartbeat.encode(hb).finish();
          const sealed = appendBytesFields(encoded, [
            [10, cert],
            [11, sig],
          ]);
          const { rest, taken } = splitFields(sealed, PROOF);
          expect(Buffer.from(rest).equals(Buffer.from(encoded))).toBe(true);
          expect([...(taken.get(10) ?? [])]).toEqual([...cert]);
          expect([...(taken.get(11) ?? [])]).toEqual([...sig]);
          const decoded = control.Heartbeat.decode(sealed);
          expect(decoded.id).toBe(hb.id);
          expect([...decoded.signature]).toEqual([...sig]);
        },
      ),
    );
  });

  it("keeps a field added after the proof in what is checked, so it cannot ride on another's signature", () => {
    const encoded = control.Heartbeat.encode({ id: "frontend-0", draining: false }).finish();
    const sealed = appendBytesFields(encoded, [[11, new Uint8Array([1, 2, 3])]]);
    const forged = new Uint8Array([...sealed, ...control.Heartbeat.encode({ draining: true }).finish()]);
    expect(control.Heartbeat.decode(forged).draining).toBe(true);
    expect(Buffer.from(splitFields(forged, PROOF).rest).equals(Buffer.from(encoded))).toBe(false);
  });

  it("throws on bytes that are not a message", () => {
    expect(() => splitFields(new Uint8Array([0x0a, 0xff]), PROOF)).toThrow();
  });
});
