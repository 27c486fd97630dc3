import { setTimeout as sleep } from "node:timers/promises";
import { AllocatorAdminDefinition, type control, InferenceServiceDefinition, type inference } from "@infergrid/proto";
import { createClient, grpc, isServiceError, unaryCall } from "@infergrid/runtime";
import type { DemoService, InputKind } from "./catalogue.js";
import type { InFlight, Outcome, SendFn } from "./load-generator.js";

type Inputs = Record<string, inference.Tensor.$Properties>;

/** The name of a gRPC status code (DEADLINE_EXCEEDED ...), or the number if unknown. */
export function codeName(code: number): string {
  return grpc.status[code] ?? String(code);
}

/** Request inputs per kind, built once: every request of a service carries the same tensors. */
export async function buildInputs(kinds: ReadonlySet<InputKind>): Promise<Record<InputKind, Inputs>> {
  const tiny: Inputs = { x: { dims: [1], data: [1] } };
  let ocr: Inputs = tiny;
  if (kinds.has("ocr")) {
    // Loaded only when asked: @infergrid/models brings onnxruntime-node along.
    const { makeOcrClsSampleInput } = await import("@infergrid/models");
    const sample = makeOcrClsSampleInput("upright");
    ocr = { x: { dims: [...sample.x.dims], data: Array.from(sample.x.data) } };
  }
  return { tiny, ocr };
}

/** A query of `batch` items: a [batch, 1] tensor of ones. */
export function batchInputs(batch: number): Inputs {
  return { x: { dims: [batch, 1], data: new Array<number>(batch).fill(1) } };
}

export class BrokerClient {
  private readonly client: grpc.Client;

  constructor(
    address: string,
    private readonly inputs: ReadonlyMap<string, Inputs>,
    private readonly deadlineMs: number,
    /** The CLI's client certificate (the broker's port takes only mutual TLS); undefined: plaintext. */
    credentials?: grpc.ChannelCredentials,
  ) {
    this.client = createClient(address, credentials);
  }

  /**
   * One Infer call with the service's inputs and the deadline; the outcome never rejects. With `batch`, the
   * input is a [batch, 1] tensor instead: a query of that many items (its first dimension is its batch size).
   */
  readonly send: SendFn = (service: string, batch?: number): InFlight => {
    let call: grpc.ClientUnaryCall | undefined;
    const inputs = batch === undefined ? (this.inputs.get(service) ?? {}) : batchInputs(batch);
    const result = new Promise<Outcome>((resolve) => {
      const method = InferenceServiceDefinition.Infer;
      try {
        call = this.client.makeUnaryRequest(
          method.path,
          method.requestSerialize,
          method.responseDeserialize,
          { service, inputs },
          new grpc.Metadata(),
          { deadline: Date.now() + this.deadlineMs },
          (err, res?: inference.InferResponse.$Properties) =>
            resolve(
              err
                ? { ok: false, code: isServiceError(err) ? codeName(err.code) : "CLIENT_ERROR" }
                : { ok: true, backendId: res?.backendId ?? "" },
            ),
        );
      } catch {
        resolve({ ok: false, code: "CLIENT_ERROR" });
      }
    });
    return { result, cancel: () => call?.cancel() };
  };

  /** Waits until a request to `service` is answered (its list assigned and a backend warm). */
  async waitServing(service: string, timeoutMs: number, stopped: () => boolean): Promise<boolean> {
    const end = Date.now() + timeoutMs;
    while (Date.now() < end && !stopped()) {
      const outcome = await this.send(service).result;
      if (outcome.ok) return true;
      await sleep(250);
    }
    return false;
  }

  close(): void {
    this.client.close();
  }
}

/**
 * Registers every service with the allocator's admin API, retrying while it is still coming up; `credentials`:
 * an admin certificate when the allocator admits its admin API by role, undefined for plaintext.
 */
export async function registerServices(
  allocatorAddress: string,
  services: readonly DemoService[],
  credentials?: grpc.ChannelCredentials,
  timeoutMs = 20_000,
): Promise<void> {
  const admin = createClient(allocatorAddress, credentials);
  try {
    for (const s of services) {
      const end = Date.now() + timeoutMs;
      for (;;) {
        try {
          await unaryCall(admin, AllocatorAdminDefinition.RegisterService, { spec: s.spec }, { deadline: Date.now() + 5_000 });
          break;
        } catch (err) {
          const retriable = isServiceError(err) && (err.code === grpc.status.UNAVAILABLE || err.code === grpc.status.DEADLINE_EXCEEDED);
          if (!retriable || Date.now() > end) {
            const detail = isServiceError(err) ? `${codeName(err.code)}: ${err.details}` : String(err);
            throw new Error(`registering ${s.name} with the allocator failed: ${detail}`);
          }
          await sleep(250);
        }
      }
    }
  } finally {
    admin.close();
  }
}

/** The ordered backend lists as the allocator holds them, for the banner. */
export async function listServices(allocatorAddress: string, credentials?: grpc.ChannelCredentials): Promise<control.ServiceEntry[]> {
  const admin = createClient(allocatorAddress, credentials);
  try {
    const reply = await unaryCall(admin, AllocatorAdminDefinition.ListServices, {}, { deadline: Date.now() + 5_000 });
    return (reply.services ?? []) as control.ServiceEntry[];
  } finally {
    admin.close();
  }
}
