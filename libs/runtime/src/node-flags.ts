/**
 * Node options every service process starts with: the Dockerfile's CMD, `npm start` (infra/local) and the tests'
 * and benchmarks' launcher (testkit service-process.ts) pass them; node-flags.test.ts checks that the Dockerfile agrees.
 *
 * `--initial-old-space-size`: a request's buffers outlive a few young-generation collections while it is in flight,
 * so they are promoted, and V8's default old-space limit for a heap of ~25 MB then starts a full mark-compact for
 * every few dozen megabytes promoted: about ten a second in a broker forwarding 588 KiB images, which ran its
 * concurrent-marking threads as hard as the request path itself. A 256 MB limit (well inside the 512 MiB the
 * Kubernetes manifests allow a broker or frontend) cut the broker's CPU per image request from 1,706 µs to 978 and
 * the tiny payload's p99 added by the two hops from 14 ms to 1.5 (`npm run bench:datapath`, docs/results.md).
 * The limit is where collection starts, not memory taken: an idle process stays at its ~100 MB.
 */
export const SERVICE_NODE_FLAGS: readonly string[] = ["--initial-old-space-size=256"];
