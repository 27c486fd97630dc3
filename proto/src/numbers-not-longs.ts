/**
 * int64 fields carry Unix milliseconds and counters, all far below 2^53: read them as plain
 * numbers. protobufjs decides between Long and number when it is configured, and the generated
 * module reads that choice as it loads, so this module must be imported before it.
 */
import protobuf from "protobufjs/minimal.js";

protobuf.util.Long = undefined as unknown as typeof protobuf.util.Long;
protobuf.configure();
