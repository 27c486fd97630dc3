import type * as grpc from "@grpc/grpc-js";
import { createClient } from "./grpc.js";

/** One channel per peer address, closed when the peer leaves the set we talk to. */
export class ClientCache {
  private readonly clients = new Map<string, grpc.Client>();

  constructor(private readonly credentials?: grpc.ChannelCredentials) {}

  get(address: string): grpc.Client {
    let c = this.clients.get(address);
    if (!c) {
      c = createClient(address, this.credentials);
      this.clients.set(address, c);
    }
    return c;
  }

  retain(addresses: Iterable<string>): void {
    const keep = new Set(addresses);
    for (const [address, client] of this.clients) {
      if (!keep.has(address)) {
        client.close();
        this.clients.delete(address);
      }
    }
  }

  closeAll(): void {
    this.retain([]);
  }
}
