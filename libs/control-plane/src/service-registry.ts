import { control, decodeMessage, encodeMessage } from "@infergrid/proto";
import type { NatsConnection } from "@infergrid/runtime";
import { type KV, Kvm } from "@nats-io/kv";
import type { Logger } from "pino";
import { createConcurrently } from "./concurrent-create.js";
import { assignmentKey, REGISTRY_BUCKET, serviceKey } from "./subjects.js";

/**
 * The service registry in JetStream KV: one key per service (its spec and ordered backend list)
 * and one per backend (its assignment). Values are full snapshots, so a watcher that sees an
 * entry twice, or re-reads after a reconnect, ends in the same state. (prom-client's `Registry`,
 * which the services also use, is their metrics registry; this one is named apart from it.)
 */
export class ServiceRegistry {
  private constructor(
    readonly kv: KV,
    private readonly logger: Logger,
  ) {}

  static async open(nc: NatsConnection, logger: Logger): Promise<ServiceRegistry> {
    const kvm = new Kvm(nc);
    const kv = await createConcurrently(() => kvm.create(REGISTRY_BUCKET, { history: 5 }));
    return new ServiceRegistry(kv, logger.child({ component: "registry" }));
  }

  async getService(name: string): Promise<{ entry: control.ServiceEntry; revision: number } | undefined> {
    const e = await this.kv.get(serviceKey(name));
    if (e?.operation !== "PUT") return undefined;
    const decoded = decodeMessage(control.ServiceEntry, e.value);
    if (!decoded.ok) {
      this.logger.warn({ key: e.key, error: decoded.error }, "garbled registry entry");
      return undefined;
    }
    return { entry: decoded.value, revision: e.revision };
  }

  /** Writes only if the key is still at `revision` (0 = must not exist); returns the new revision. */
  async putService(entry: control.IServiceEntry, revision?: number): Promise<number> {
    const name = entry.spec?.name ?? "";
    const bytes = encodeMessage(control.ServiceEntry, entry);
    if (revision === undefined) return this.kv.put(serviceKey(name), bytes);
    if (revision === 0) return this.kv.create(serviceKey(name), bytes);
    return this.kv.update(serviceKey(name), bytes, revision);
  }

  async deleteService(name: string): Promise<void> {
    await this.kv.delete(serviceKey(name));
  }

  async listServices(): Promise<control.ServiceEntry[]> {
    const names: string[] = [];
    for await (const key of await this.kv.keys("svc.*")) names.push(key.slice(4));
    const entries = await Promise.all(names.sort().map((n) => this.getService(n)));
    return entries.flatMap((e) => (e ? [e.entry] : []));
  }

  async getAssignment(backendId: string): Promise<control.BackendAssignment | undefined> {
    const e = await this.kv.get(assignmentKey(backendId));
    if (e?.operation !== "PUT") return undefined;
    const decoded = decodeMessage(control.BackendAssignment, e.value);
    return decoded.ok ? decoded.value : undefined;
  }

  async putAssignment(assignment: control.IBackendAssignment): Promise<number> {
    return this.kv.put(assignmentKey(assignment.backendId ?? ""), encodeMessage(control.BackendAssignment, assignment));
  }

  async deleteAssignment(backendId: string): Promise<void> {
    await this.kv.delete(assignmentKey(backendId));
  }

  /** Calls `onChange(name, entry | undefined)` for every current service and every later change. */
  watchServices(onChange: (name: string, entry: control.ServiceEntry | undefined, revision: number) => void): () => void {
    return this.watch("svc.>", (key, value, revision) => {
      const name = key.slice(4);
      if (!value) return onChange(name, undefined, revision);
      const decoded = decodeMessage(control.ServiceEntry, value);
      if (decoded.ok) onChange(name, decoded.value, revision);
      else this.logger.warn({ key, error: decoded.error }, "dropped a garbled registry entry");
    });
  }

  watchAssignment(backendId: string, onChange: (assignment: control.BackendAssignment | undefined) => void): () => void {
    return this.watch(assignmentKey(backendId), (key, value) => {
      if (!value) return onChange(undefined);
      const decoded = decodeMessage(control.BackendAssignment, value);
      if (decoded.ok) onChange(decoded.value);
      else this.logger.warn({ key, error: decoded.error }, "dropped a garbled assignment");
    });
  }

  /** A watch that re-opens itself if its iterator ends (NATS restarted, stream recreated). */
  private watch(key: string, onEntry: (key: string, value: Uint8Array | undefined, revision: number) => void): () => void {
    let stopped = false;
    let current: { stop(): void } | undefined;
    const loop = async () => {
      while (!stopped) {
        try {
          const it = await this.kv.watch({ key });
          current = it;
          for await (const e of it) {
            if (stopped) break;
            onEntry(e.key, e.operation === "PUT" ? e.value : undefined, e.revision);
          }
        } catch (err) {
          if (!stopped) this.logger.warn({ err, key }, "registry watch failed; retrying");
        }
        if (!stopped) await new Promise((r) => setTimeout(r, 500));
      }
    };
    void loop();
    return () => {
      stopped = true;
      current?.stop();
    };
  }
}
