import type * as grpc from "@grpc/grpc-js";
import { createClient, defaultChannelTls } from "./grpc.js";
import { H2Channel, type UnaryChannel } from "./h2-channel.js";
import { MultiplexChannel } from "./multiplex.js";

/** What the request path's channels are given: the same limits and keepalive the grpc-js clients had. */
const CHANNEL_DEFAULTS = {
  maxReceiveMessageBytes: 16 * 1024 * 1024,
  keepaliveMs: 10_000,
  keepaliveTimeoutMs: 5_000,
  initialBackoffMs: 200,
  maxBackoffMs: 2_000,
};

/**
 * Requests up to this size go over the peer's multiplexed stream, larger ones as unary calls of their own: a
 * message on a stream goes out whole before the next starts, so one image would hold up the small calls behind it.
 * 16 KiB token batches streamed at 0.59x the direct rate against 0.34x unary, once the servers granted 4 MiB
 * windows (grpc.ts SERVER_WINDOW_BYTES; under Node's 64 KiB they streamed at half the unary rate).
 */
export const MAX_STREAMED_REQUEST_BYTES = 64 * 1024;

/**
 * One channel per peer address, closed when the peer leaves the set we talk to. Without credentials of its
 * own: calls multiplexed over one stream per peer (multiplex.ts), large ones unary over the request path's
 * HTTP/2 channel, both with the process's TLS; with credentials, a grpc-js client.
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
        const unary = new H2Channel(address, { ...CHANNEL_DEFAULTS, ...(tls ? { tls } : {}) });
        c = new MultiplexChannel(address, { unary, maxStreamedBytes: MAX_STREAMED_REQUEST_BYTES });
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
