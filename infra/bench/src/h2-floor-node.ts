/**
 * One process of `bench:h2-floor`: a bare node:http2 server ("server") that reads each request body and answers
 * 16 bytes, or a proxy ("proxy") that forwards each request to its upstream and the answer back, chunk by chunk as
 * they arrive, over one HTTP/2 session: the least a Node process can do per forwarded request. With "store", a
 * proxy forwards a request's body only once all of it has arrived, in one write, as a hop that decodes or
 * checks a whole message must.
 *
 *   node h2-floor-node.js server <port> | proxy <port> <upstream port> [store]
 */
import http2 from "node:http2";

const [role, port, upstream, mode] = process.argv.slice(2);
const ANSWER = Buffer.alloc(16, 7);
// Node's 10 MB default of session memory refuses streams with 32 image uploads in flight.
const SETTINGS = { maxSessionMemory: 256, settings: { initialWindowSize: 4 * 1024 * 1024 } };
const session = role === "proxy" ? http2.connect(`http://127.0.0.1:${upstream}`, SETTINGS) : undefined;
session?.on("error", (err) => {
  console.error(`h2-floor ${role}: upstream session failed: ${err.message}`);
  process.exit(1);
});
const server = http2.createServer(SETTINGS);
server.on("stream", (stream) => {
  // A failed stream is the benchmark's error to count, not this process's end.
  stream.on("error", () => {});
  if (!session) {
    stream.on("data", () => {});
    stream.on("end", () => {
      stream.respond({ ":status": 200 });
      stream.end(ANSWER);
    });
    return;
  }
  const forward = session.request({ ":method": "POST", ":path": "/x" });
  forward.on("error", () => stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR));
  if (mode === "store") {
    const parts: Buffer[] = [];
    stream.on("data", (chunk: Buffer) => parts.push(chunk));
    stream.on("end", () => forward.end(Buffer.concat(parts)));
  } else {
    stream.on("data", (chunk: Buffer) => forward.write(chunk));
    stream.on("end", () => forward.end());
  }
  forward.on("response", () => stream.respond({ ":status": 200 }));
  forward.on("data", (chunk: Buffer) => stream.write(chunk));
  forward.on("end", () => stream.end());
});
server.listen(Number(port), "127.0.0.1", () => process.send?.("ready"));
// Gone with the benchmark, however it ended.
process.on("disconnect", () => process.exit(0));
