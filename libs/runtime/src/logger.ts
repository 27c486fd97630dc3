import { type DestinationStream, type Logger, pino } from "pino";

export type { Logger };

/** One root logger per process; components take `logger.child({ component })`. */
export function createLogger(service: string, id: string, level: string, destination?: DestinationStream): Logger {
  const options = {
    level,
    base: { service, id },
    timestamp: pino.stdTimeFunctions.isoTime,
    // Credentials may sit in config objects that get logged: never print them.
    redact: {
      paths: [
        "*.password",
        "*.token",
        "*.pass",
        "*.user",
        "*.credentials",
        "*.natsPass",
        "*.natsToken",
        "*.controlToken",
        // The same fields at the top level of a log call, and in a config object logged whole.
        "password",
        "token",
        "pass",
        "natsPass",
        "natsToken",
        "controlToken",
        "*.*.natsPass",
        "*.*.natsToken",
        "*.*.controlToken",
      ],
      censor: "[redacted]",
    },
  };
  // Tests pass a destination to read what would have been printed; services print to stdout.
  return destination === undefined ? pino(options) : pino(options, destination);
}

/**
 * The line a process prints once it serves: launchers (tests, the local cluster) read the bound
 * addresses from it, which is what lets every service listen on port 0.
 */
export function announceReady(logger: Logger, addresses: Record<string, string>): void {
  // Printed whatever the configured level: launchers depend on it.
  logger.child({}, { level: "info" }).info({ event: "ready", ...addresses }, "ready");
}
