import { describe, expect, it } from "vitest";
import { BufferPool } from "./buffer-pool.js";

describe("BufferPool", () => {
  it("serves a size from the power-of-two class above it, at least minBytes", () => {
    const pool = new BufferPool(1 << 30, 64 * 1024);
    expect(pool.classOf(1)).toBe(64 * 1024);
    expect(pool.classOf(64 * 1024)).toBe(64 * 1024);
    expect(pool.classOf(64 * 1024 + 1)).toBe(128 * 1024);
    expect(pool.classOf(588 * 1024)).toBe(1024 * 1024);
    const b = pool.take(588 * 1024);
    expect(b.bytes.length).toBe(588 * 1024);
    expect(b.bytes.buffer.byteLength).toBe(1024 * 1024);
  });

  it("reuses what was given back, and allocates only when a class's list is empty", () => {
    const pool = new BufferPool(1 << 30);
    const a = pool.take(100_000);
    const first = a.bytes.buffer;
    a.release();
    expect(pool.heldBytes).toBe(128 * 1024);
    const b = pool.take(120_000);
    expect(b.bytes.buffer).toBe(first);
    expect(pool.heldBytes).toBe(0);
    const c = pool.take(120_000);
    expect(c.bytes.buffer).not.toBe(first);
    expect(pool.allocations).toBe(2);
  });

  it("ignores a second release (a buffer is never in the free list twice)", () => {
    const pool = new BufferPool(1 << 30);
    const a = pool.take(70_000);
    a.release();
    a.release();
    expect(pool.heldBytes).toBe(128 * 1024);
    const x = pool.take(70_000);
    const y = pool.take(70_000);
    expect(x.bytes.buffer).not.toBe(y.bytes.buffer);
  });

  it("keeps at most maxPooledBytes; the rest goes to the collector", () => {
    const pool = new BufferPool(256 * 1024);
    const taken = [pool.take(200_000), pool.take(200_000), pool.take(200_000)];
    for (const t of taken) t.release();
    expect(pool.heldBytes).toBe(256 * 1024);
  });

  it("refuses sizes that are not byte counts", () => {
    const pool = new BufferPool(1024);
    expect(() => pool.take(-1)).toThrow(RangeError);
    expect(() => pool.take(1.5)).toThrow(RangeError);
    expect(() => new BufferPool(-1)).toThrow(RangeError);
  });
});
