import { JetStreamApiError } from "@nats-io/jetstream";
import { describe, expect, it } from "vitest";
import { createConcurrently } from "./concurrent-create.js";

const apiError = (err_code: number, description: string) => new JetStreamApiError({ code: 400, err_code, description });

describe("createConcurrently", () => {
  it("runs the create again while the server says another create of the same stream is under way", async () => {
    const refusals = [apiError(10065, "subjects overlap with an existing stream"), apiError(10058, "stream name already in use")];
    let calls = 0;
    const made = await createConcurrently(async () => {
      calls++;
      const refusal = refusals.shift();
      if (refusal) throw refusal;
      return "stream";
    });
    expect(made).toBe("stream");
    expect(calls).toBe(3);
  });

  it("passes any other error on at once", async () => {
    let calls = 0;
    const refused = createConcurrently(async () => {
      calls++;
      throw apiError(10047, "insufficient storage resources available");
    });
    await expect(refused).rejects.toThrow("insufficient storage");
    expect(calls).toBe(1);
  });

  it("gives up with the server's refusal once the wait is over (a stream of another name holds the subjects)", async () => {
    let calls = 0;
    const refused = createConcurrently(async () => {
      calls++;
      throw apiError(10065, "subjects overlap with an existing stream");
    }, 120);
    await expect(refused).rejects.toThrow("subjects overlap");
    expect(calls).toBeGreaterThan(1);
  });
});
