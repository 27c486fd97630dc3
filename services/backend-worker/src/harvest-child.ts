/**
 * The best-effort process of a harvesting backend (harvester.ts, child-runtime.ts): one job's model in a process
 * of its own, so that the backend can stop it (SIGSTOP) the moment an inference request computes and continue it
 * (SIGCONT) when the backend idles. It answers its parent over IPC and exits when the parent goes.
 */
import { seededRandom } from "@infergrid/core";
import { createModelRuntime, InvalidModelInputError, type ModelRuntime } from "@infergrid/models";
import { type ChildReply, type ChildRequest, pausableSleep } from "./child-runtime.js";

let runtime: ModelRuntime | undefined;
// The emulated model draws its service times from this; each call sets it from the parent's seed.
let stream = seededRandom(0);

function reply(message: ChildReply): void {
  process.send?.(message);
}

process.on("message", (message: ChildRequest) => {
  switch (message.kind) {
    case "load":
      runtime = createModelRuntime(message.spec, { random: { uniform: () => stream.uniform() }, sleep: pausableSleep });
      runtime.load().then(
        ({ coldStartMs }) => reply({ kind: "loaded", coldStartMs }),
        (err: unknown) => reply({ kind: "failed", id: 0, message: String(err), invalidInput: false }),
      );
      return;
    case "infer": {
      const model = runtime;
      if (!model) {
        reply({ kind: "failed", id: message.id, message: "no model loaded", invalidInput: false });
        return;
      }
      stream = seededRandom(message.seed);
      model.infer(message.inputs).then(
        (r) => reply({ kind: "result", id: message.id, outputs: r.outputs, computeMs: r.computeMs }),
        (err: unknown) =>
          reply({
            kind: "failed",
            id: message.id,
            message: err instanceof Error ? err.message : String(err),
            invalidInput: err instanceof InvalidModelInputError,
          }),
      );
      return;
    }
  }
});
// Gone with the backend, however it ended.
process.on("disconnect", () => process.exit(0));
reply({ kind: "ready" });
