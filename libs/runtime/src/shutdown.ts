import type { Logger } from "pino";

export interface ShutdownStep {
  name: string;
  run(): Promise<void> | void;
}

/**
 * On SIGINT/SIGTERM runs the steps in order (say: health NOT_SERVING, stop loops, drain NATS,
 * close the gRPC server) and exits; a step that hangs past the deadline does not keep the
 * process alive.
 */
export function installShutdown(logger: Logger, steps: ShutdownStep[], deadlineMs = 10_000): () => Promise<void> {
  let started: Promise<void> | undefined;
  const shutdown = (): Promise<void> => {
    if (started) return started;
    started = (async () => {
      const timer = setTimeout(() => {
        logger.error({ deadlineMs }, "shutdown deadline passed, exiting");
        process.exit(1);
      }, deadlineMs);
      timer.unref();
      for (const step of steps) {
        try {
          await step.run();
        } catch (err) {
          logger.warn({ err, step: step.name }, "shutdown step failed");
        }
      }
      logger.info("stopped");
    })();
    return started;
  };
  const onSignal = (signal: NodeJS.Signals) => {
    logger.info({ signal }, "shutting down");
    void shutdown().then(() => process.exit(0));
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  process.on("unhandledRejection", (err) => logger.error({ err }, "unhandled rejection"));
  return shutdown;
}
