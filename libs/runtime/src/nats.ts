import { decodeMessage, encodeMessage, type MessageType } from "@infergrid/proto";
import { connect, type NatsConnection, type Subscription } from "@nats-io/transport-node";
import type { Logger } from "pino";
import { LogThrottle } from "./log-throttle.js";

export type { NatsConnection, Subscription };

export interface NatsOptions {
  servers: string;
  name: string;
  user?: string | undefined;
  pass?: string | undefined;
  token?: string | undefined;
  /** TLS towards NATS: the CA to verify the server with, and a client certificate if it asks for one. */
  tls?: { caFile?: string; certFile?: string; keyFile?: string } | undefined;
}

/**
 * Where a user's replies come (JetStream's answers, pulled job items, KV reads and watches): `_INBOX.<user>`,
 * so that nats-server can let each user subscribe to its own replies only (libs/control-plane
 * nats-permissions). Under the default `_INBOX` prefix every user would need `_INBOX.>`, and could read what
 * JetStream answered any other, job items for other backends included.
 */
export function inboxPrefixOf(user: string): string {
  return `_INBOX.${user}`;
}

/** A NATS user name is one subject token, since it names the user's inbox. */
export const NATS_USER_PATTERN = /^[A-Za-z0-9_-]+$/;

/**
 * Connects and keeps reconnecting forever: the fast loop must go on while NATS is away, and
 * pick the control plane up again when it is back.
 */
export async function connectNats(options: NatsOptions, logger: Logger): Promise<NatsConnection> {
  const nc = await connect({
    servers: options.servers.split(","),
    name: options.name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 500,
    waitOnFirstConnect: true,
    ...(options.user === undefined ? {} : { user: options.user, pass: options.pass ?? "", inboxPrefix: inboxPrefixOf(options.user) }),
    ...(options.token === undefined ? {} : { token: options.token }),
    ...(options.tls === undefined ? {} : { tls: options.tls }),
  });
  const log = logger.child({ component: "nats" });
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === "disconnect" || s.type === "reconnect" || s.type === "error") log.warn({ status: s.type }, `nats ${s.type}`);
    }
  })();
  log.info({ server: nc.getServer() }, "connected to nats");
  return nc;
}

export function publishMessage<T, P>(nc: NatsConnection, subject: string, type: MessageType<T, P>, message: P): void {
  nc.publish(subject, encodeMessage(type, message));
}

/**
 * Subscribes and decodes with the proto type. A garbled message is dropped, counted through `onGarbled`, and
 * logged at most 5 times per subject in 10 s (the next line written says how many were not); it never stops
 * the subscription or the service.
 */
const garbledLines = new LogThrottle();

export function subscribeMessages<T, P>(
  nc: NatsConnection,
  subject: string,
  type: MessageType<T, P>,
  logger: Logger,
  /** `data`: the bytes as they came (for a reader that checks a signature over them). */
  handle: (message: T, subject: string, data: Uint8Array) => void | Promise<void>,
  options: { queue?: string; onGarbled?: (subject: string) => void } = {},
): Subscription {
  return nc.subscribe(subject, {
    ...(options.queue === undefined ? {} : { queue: options.queue }),
    callback: (err, msg) => {
      if (err) {
        logger.warn({ err, subject }, "subscription error");
        return;
      }
      const decoded = decodeMessage(type, msg.data);
      if (!decoded.ok) {
        options.onGarbled?.(msg.subject);
        const { write, suppressed } = garbledLines.admit(msg.subject, Date.now());
        if (write) {
          logger.warn(
            { subject: msg.subject, bytes: msg.data.length, error: decoded.error, ...(suppressed > 0 ? { suppressed } : {}) },
            "dropped a garbled message",
          );
        }
        return;
      }
      try {
        const result = handle(decoded.value, msg.subject, msg.data);
        if (result instanceof Promise)
          result.catch((e: unknown) => logger.error({ err: e, subject: msg.subject }, "message handler failed"));
      } catch (e) {
        logger.error({ err: e, subject: msg.subject }, "message handler failed");
      }
    },
  });
}
