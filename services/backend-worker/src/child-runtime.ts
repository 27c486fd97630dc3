/**
 * A model run in a child process (harvest-child.ts) that its parent can stop and continue at once: the
 * best-effort side of a harvesting backend (harvester.ts). An in-process model call cannot be interrupted; a
 * stopped process takes no CPU from the inference model beside it, and loses nothing of what it was computing.
 * Discarding kills the process (an item given up); the next call starts a new one, stopped if the runtime is.
 */
import { type ChildProcess, fork } from "node:child_process";
import { setTimeout as sleepTimer } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import type { Random } from "@infergrid/core";
import { type InferResult, InvalidModelInputError, type ModelRuntime, type ModelSpec, type TensorValue } from "@infergrid/models";

export type ChildRequest =
  | { kind: "load"; spec: ModelSpec }
  | { kind: "infer"; id: number; inputs: Record<string, TensorValue>; seed: number };

export type ChildReply =
  | { kind: "ready" }
  | { kind: "loaded"; coldStartMs: number }
  | { kind: "result"; id: number; outputs: Record<string, TensorValue>; computeMs: number }
  | { kind: "failed"; id: number; message: string; invalidInput: boolean };

/** A model runtime the backend can stop while inference computes. */
export interface PausableRuntime extends ModelRuntime {
  /** Stops the process now (SIGSTOP); calls wait, their progress kept. */
  pause(): void;
  /** Continues it (SIGCONT). */
  resume(): void;
  /** Kills the process: calls in flight fail; the next call starts a new one. */
  discard(): void;
  /** The process's pid, while there is one. */
  readonly pid: number | undefined;
}

const STEP_MS = 5;

/**
 * An emulated model's sleep that a stop holds: time passes in short steps, and a step that took far longer than
 * asked (the process was stopped) counts only what it asked, so a stopped emulated item resumes where it was, as
 * a computing one would.
 */
export async function pausableSleep(ms: number): Promise<void> {
  let left = ms;
  while (left > 0) {
    const step = Math.min(STEP_MS, left);
    const t0 = performance.now();
    await sleepTimer(step);
    left -= Math.min(performance.now() - t0, 2 * step);
  }
}

// Run from the sources (the tests), the child is the built one beside them.
const CHILD = fileURLToPath(new URL(import.meta.url.endsWith(".ts") ? "../dist/harvest-child.js" : "./harvest-child.js", import.meta.url));

export class ChildRuntime implements PausableRuntime {
  readonly name: string;
  private child: ChildProcess | undefined;
  private loaded: Promise<{ coldStartMs: number }> | undefined;
  private paused = false;
  private nextId = 1;
  /** Bumped by each discard: a call that began before one fails. */
  private generation = 0;
  private readonly calls = new Map<number, { resolve(r: InferResult): void; reject(e: Error): void }>();

  constructor(
    private readonly spec: ModelSpec,
    /** Each call's service times (an emulated model) are drawn from a seed taken from this. */
    private readonly random: Random,
  ) {
    this.name = `${spec.kind === "onnx" ? spec.model : "emulated"} (best-effort process)`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  load(): Promise<{ coldStartMs: number }> {
    this.loaded ??= this.start();
    return this.loaded;
  }

  async infer(inputs: Record<string, TensorValue>): Promise<InferResult> {
    const seed = Math.floor(this.random.uniform() * 2 ** 31);
    const generation = this.generation;
    await this.load();
    if (this.generation !== generation) throw new Error("the best-effort process was discarded");
    const child = this.child;
    if (!child?.connected) throw new Error("the best-effort process is gone");
    const id = this.nextId++;
    return new Promise<InferResult>((resolve, reject) => {
      this.calls.set(id, { resolve, reject });
      child.send({ kind: "infer", id, inputs, seed } satisfies ChildRequest);
    });
  }

  pause(): void {
    this.paused = true;
    this.signal("SIGSTOP");
  }

  resume(): void {
    this.paused = false;
    this.signal("SIGCONT");
  }

  discard(): void {
    this.generation++;
    const child = this.child;
    this.child = undefined;
    this.loaded = undefined;
    child?.kill("SIGKILL");
    this.failAll(new Error("the best-effort process was discarded"));
  }

  async unload(): Promise<void> {
    this.discard();
  }

  private signal(signal: NodeJS.Signals): void {
    try {
      this.child?.kill(signal);
    } catch {
      // Already gone: its exit handler fails its calls.
    }
  }

  private start(): Promise<{ coldStartMs: number }> {
    const child = fork(CHILD, [], { serialization: "advanced", stdio: ["ignore", "inherit", "inherit", "ipc"] });
    this.child = child;
    if (this.paused) child.kill("SIGSTOP");
    return new Promise((resolve, reject) => {
      child.on("message", (m: ChildReply) => {
        switch (m.kind) {
          case "ready":
            child.send({ kind: "load", spec: this.spec } satisfies ChildRequest);
            return;
          case "loaded":
            resolve({ coldStartMs: m.coldStartMs });
            return;
          case "result":
            this.settle(m.id)?.resolve({ outputs: m.outputs, computeMs: m.computeMs });
            return;
          case "failed": {
            if (m.id === 0) {
              reject(new Error(`the best-effort process cannot load its model: ${m.message}`));
              return;
            }
            this.settle(m.id)?.reject(m.invalidInput ? new InvalidModelInputError(m.message) : new Error(m.message));
            return;
          }
        }
      });
      const gone = (err: Error) => {
        reject(err);
        if (this.child === child) {
          this.child = undefined;
          this.loaded = undefined;
          this.failAll(err);
        }
      };
      child.once("exit", (code, signal) => gone(new Error(`the best-effort process exited (${signal ?? code})`)));
      // A fork that failed (EAGAIN at the pids limit, EMFILE) or a message to a process already gone: without a
      // listener the event would be an uncaught exception, taking the backend and its inference requests down.
      child.on("error", (err) => {
        gone(new Error(`the best-effort process failed: ${err.message}`));
        try {
          child.kill("SIGKILL");
        } catch {
          // Never started, or already gone.
        }
      });
    });
  }

  private settle(id: number) {
    const call = this.calls.get(id);
    this.calls.delete(id);
    return call;
  }

  private failAll(err: Error): void {
    const calls = [...this.calls.values()];
    this.calls.clear();
    for (const c of calls) c.reject(err);
  }
}
