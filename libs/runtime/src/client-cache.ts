import type * as grpc from "@grpc/grpc-js";
import { createClient, defaultChannelTls } from "./grpc.js";
import { H2Channel, type UnaryChannel } from "./h2-channel.js";

/** What the request path's channels are given: the same limits and keepalive the grpc-js clients had. */
const CHANNEL_DEFAULTS = {
  maxReceiveMessageBytes: 16 * 1024 * 1024,
  keepaliveMs: 10_000,
  keepaliveTimeoutMs: 5_000,
  initialBackoffMs: 200,
  maxBackoffMs: 2_000,
};

/**
 * One channel per peer address, closed when the peer leaves the set we talk to. Without credentials of its
 * own, the request path's HTTP/2 channel with the process's TLS; with them, a grpc-js client.
 */
export class ClientCache {
  private readonly clients = new Map<string, UnaryChannel>();

  constructor(private readonly credentials?: grpc.ChannelCredentials) {}

  get(address: string): UnaryChannel {
    let c = this.clients.get(address);
    if (!c) {
      if (this.credentials) c = createClient(address, this.credentials);
      else {
        const tls = defaultChannelTls();
        c = new H2Channel(address, { ...CHANNEL_DEFAULTS, ...(tls ? { tls } : {}) });
      }
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
