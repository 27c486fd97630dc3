import type { ServiceRegistry } from "@infergrid/control-plane";
import { control } from "@infergrid/proto";
import type { Logger } from "@infergrid/runtime";

export interface BackendRef {
  backendId: string;
  address: string;
}

/** A registry entry as the frontend uses it: plain, fully typed values. */
export interface ServiceView {
  name: string;
  spec: control.ServiceSpec;
  backends: BackendRef[];
  version: number;
  minWarm: number;
}

export function toView(name: string, entry: control.ServiceEntry): ServiceView {
  return {
    name,
    spec: control.ServiceSpec.fromObject((entry.spec ?? {}) as Record<string, unknown>),
    backends: entry.backends
      .map((b) => ({ backendId: b.backendId ?? "", address: b.address ?? "" }))
      .filter((b) => b.backendId && b.address),
    version: Number(entry.version),
    minWarm: entry.minWarm,
  };
}

/**
 * The frontend's copy of the registry: every service's spec and ordered backend list, as the
 * allocator last wrote it. All frontends watch the same versioned KV entries, which is what lets
 * them agree on who B_1..B_n are without talking to each other.
 */
export class ServiceTable {
  private readonly entries = new Map<string, ServiceView>();
  private stopWatch: (() => void) | undefined;

  constructor(
    private readonly registry: ServiceRegistry,
    private readonly logger: Logger,
    private readonly onChange: (name: string, view: ServiceView | undefined) => void,
  ) {}

  start(): void {
    this.stopWatch = this.registry.watchServices((name, entry) => {
      const previous = this.entries.get(name);
      if (!entry) {
        if (previous) this.logger.info({ service: name }, "service removed");
        this.entries.delete(name);
        this.onChange(name, undefined);
        return;
      }
      const view = toView(name, entry);
      if (previous && previous.version > view.version) return;
      if (!previous || previous.version !== view.version) {
        this.logger.info({ service: name, version: view.version, backends: view.backends.length }, "ordered list updated");
      }
      this.entries.set(name, view);
      this.onChange(name, view);
    });
  }

  stop(): void {
    this.stopWatch?.();
  }

  get(name: string): ServiceView | undefined {
    return this.entries.get(name);
  }

  names(): string[] {
    return [...this.entries.keys()].sort();
  }

  addresses(): string[] {
    return [...this.entries.values()].flatMap((e) => e.backends.map((b) => b.address));
  }
}
