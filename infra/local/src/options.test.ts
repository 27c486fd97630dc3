import { describe, expect, it } from "vitest";
import { CommanderError, OptionsError, parseOptions } from "./options.js";

const silent = { writeOut: () => {}, writeErr: () => {} };

function errorOf(argv: string[]): string {
  const captured: string[] = [];
  try {
    parseOptions(argv, { writeOut: () => {}, writeErr: (s) => captured.push(s) });
  } catch (err) {
    if (err instanceof CommanderError || err instanceof OptionsError) return `${err.message} ${captured.join("")}`;
    throw err;
  }
  throw new Error(`expected ${argv.join(" ")} to be refused`);
}

describe("parseOptions", () => {
  it("has defaults for a plain `npm start`", () => {
    const o = parseOptions([], silent);
    expect(o).toMatchObject({
      trace: undefined,
      compression: 60,
      fromMinute: 0,
      backends: 12,
      frontends: 3,
      policy: "infergrid",
      seed: 1,
      idleTimeoutMs: 30_000,
      onnx: true,
      deadlineMs: 10_000,
      maxInFlight: 2_000,
      logLevel: "warn",
      restart: true,
    });
    expect(parseOptions(["--no-restart"], silent).restart).toBe(false);
    expect(o.peakRps).toBeUndefined();
    expect(o.rateScale).toBeUndefined();
  });

  it("runs the system's default policy unless told otherwise, and Swayam's for the one service of --themis or --kairos", () => {
    expect(parseOptions(["--policy", "fixed-peak"], silent).policy).toBe("fixed-peak");
    expect(parseOptions(["--themis", "resnet18"], silent).policy).toBe("swayam");
    expect(parseOptions(["--kairos", "dien", "--types", "t3.xlarge=1"], silent).policy).toBe("swayam");
    expect(parseOptions(["--themis", "resnet18", "--policy", "static"], silent).policy).toBe("static");
  });

  it("reads every option", () => {
    const o = parseOptions(
      [
        "--trace",
        "t.csv",
        "--jobs",
        "a, b",
        "--compression",
        "120",
        "--peak-rps",
        "30.5",
        "--from-minute",
        "10",
        "--minutes",
        "5",
        "--duration",
        "15",
        "--backends",
        "4",
        "--frontends",
        "2",
        "--policy",
        "static",
        "--seed",
        "7",
        "--idle-timeout-ms",
        "0",
        "--summary-json",
        "out.json",
      ],
      silent,
    );
    expect(o).toMatchObject({
      trace: "t.csv",
      jobs: ["a", "b"],
      compression: 120,
      peakRps: 30.5,
      fromMinute: 10,
      minutes: 5,
      durationS: 15,
      backends: 4,
      frontends: 2,
      policy: "static",
      seed: 7,
      idleTimeoutMs: 0,
      summaryJson: "out.json",
    });
    expect(parseOptions(["--no-onnx"], silent).onnx).toBe(false);
  });

  it.each([
    [["--backends", "0"], "--backends <n>' argument '0' is invalid. must be an integer >= 1"],
    [["--backends", "x"], "argument 'x' is invalid"],
    [["--frontends", "1.5"], "must be an integer >= 1"],
    [["--compression", "-1"], "must be a number > 0"],
    [["--compression", "0"], "must be a number > 0"],
    [["--peak-rps", "abc"], "must be a number > 0"],
    [["--rate-scale", "-2"], "must be a number >= 0"],
    [["--from-minute", "-1"], "must be an integer >= 0"],
    [["--minutes", "0"], "must be an integer >= 1"],
    [["--duration", ""], "must be a number > 0"],
    [["--policy", "faro"], "Allowed choices are swayam, infergrid, static"],
    [["--log-level", "loud"], "Allowed choices are trace"],
    [["--trace", "t.csv", "--jobs", "a,a"], "names a job twice"],
    [["--trace", "t.csv", "--jobs", ","], "must name at least one job"],
    [["--console-port", "70000"], "must be a port number (0 to 65535)"],
    [["--bogus"], "unknown option '--bogus'"],
    [["extra"], "too many arguments"],
  ])("refuses %j with a clear message", (argv, message) => {
    expect(errorOf(argv)).toContain(message);
  });

  it("refuses combinations that make no sense, naming the options", () => {
    expect(errorOf(["--peak-rps", "10", "--rate-scale", "1"])).toContain("--peak-rps and --rate-scale cannot both be given");
    expect(errorOf(["--jobs", "a"])).toContain("--jobs needs --trace");
    expect(errorOf(["--top-jobs", "3"])).toContain("--top-jobs needs --trace");
    // The vertical and heterogeneous modes have one service of their own: a job list was silently ignored.
    expect(errorOf(["--themis", "resnet18", "--jobs", "a"])).toContain("--themis cannot be combined with --jobs");
    expect(errorOf(["--kairos", "dien", "--types", "t3.xlarge=1", "--top-jobs", "2"])).toContain(
      "--kairos cannot be combined with --top-jobs",
    );
    expect(errorOf(["--trace", "t.csv", "--no-onnx"])).toContain("--no-onnx only applies to the synthetic workload");
  });

  it("reads the heterogeneous mode's options", () => {
    const o = parseOptions(
      ["--kairos", "dien", "--types", "g4dn.xlarge=2, t3.xlarge=3", "--profiles", "p.csv", "--peak-rps", "15"],
      silent,
    );
    expect(o).toMatchObject({
      kairos: "dien",
      types: [
        { type: "g4dn.xlarge", count: 2 },
        { type: "t3.xlarge", count: 3 },
      ],
      profiles: "p.csv",
      peakRps: 15,
    });
    expect(parseOptions([], silent)).toMatchObject({ kairos: undefined, types: undefined, profiles: undefined });
  });

  it.each([
    [["--kairos", "dien", "--types", "g4dn.xlarge"], '"g4dn.xlarge" is not <instance type>=<backends>'],
    [["--kairos", "dien", "--types", "t3.xlarge=0"], '"t3.xlarge=0": the backends must be an integer >= 1'],
    [["--kairos", "dien", "--types", "t3.xlarge=1.5"], "must be an integer >= 1"],
    [["--kairos", "dien", "--types", "=2"], "is not <instance type>=<backends>"],
    [["--kairos", "dien", "--types", "t3.xlarge=1,t3.xlarge=2"], "names instance type t3.xlarge twice"],
    [["--kairos", "dien", "--types", ","], "must name at least one <instance type>=<backends>"],
    [["--kairos", "dien"], "--kairos needs --types"],
    [["--types", "t3.xlarge=1"], "--types needs --kairos <model>"],
    [["--profiles", "p.csv"], "--profiles needs --kairos <model>"],
    [["--kairos", "dien", "--types", "t3.xlarge=1", "--backends", "4"], "--kairos cannot be combined with --backends"],
    [
      ["--kairos", "dien", "--types", "t3.xlarge=1", "--trace", "t.csv", "--no-onnx"],
      "--kairos cannot be combined with --trace, --no-onnx",
    ],
    [["--kairos", "dien", "--types", "t3.xlarge=1", "--policy", "fixed-peak"], "--kairos takes --policy swayam or static, not fixed-peak"],
  ])("refuses %j in the heterogeneous mode", (argv, message) => {
    expect(errorOf(argv)).toContain(message);
  });

  it("reads the vertical-scaling mode's options, with its defaults", () => {
    expect(parseOptions(["--themis", "resnet18"], silent)).toMatchObject({
      themis: "resnet18",
      baseRps: 3,
      stepAtS: 10,
      stepForS: 20,
      sloMs: 1000,
      nodeCores: 8,
      coldStartMs: 10_000,
      peakRps: undefined,
    });
    const o = parseOptions(
      [
        "--themis",
        "resnet18",
        "--base-rps",
        "4",
        "--peak-rps",
        "30",
        "--step-at",
        "3",
        "--step-for",
        "9",
        "--node-cores",
        "4",
        "--cold-start-ms",
        "5000",
        "--slo-ms",
        "800",
      ],
      silent,
    );
    expect(o).toMatchObject({ baseRps: 4, peakRps: 30, stepAtS: 3, stepForS: 9, nodeCores: 4, coldStartMs: 5000, sloMs: 800 });
  });

  it.each([
    [["--step-at", "3"], "--step-at needs --themis <model>"],
    [["--base-rps", "3", "--node-cores", "4"], "--base-rps, --node-cores need --themis <model>"],
    [["--themis", "resnet18", "--backends", "4"], "--themis cannot be combined with --backends"],
    [["--themis", "resnet18", "--kairos", "dien"], "--themis cannot be combined with --kairos"],
    [["--themis", "resnet18", "--policy", "infergrid"], "--themis takes --policy swayam or static, not infergrid"],
    [["--themis", "resnet18", "--node-cores", "0"], "must be an integer >= 1"],
  ])("refuses %j in the vertical-scaling mode", (argv, message) => {
    expect(errorOf(argv)).toContain(message);
  });

  it("--help ends with exit code 0 and lists the options", () => {
    let out = "";
    try {
      parseOptions(["--help"], { writeOut: (s) => (out += s), writeErr: () => {} });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(CommanderError);
      expect((err as CommanderError).exitCode).toBe(0);
    }
    for (const flag of ["--trace", "--jobs", "--compression", "--peak-rps", "--rate-scale", "--from-minute", "--minutes", "--duration"]) {
      expect(out).toContain(flag);
    }
    for (const flag of [
      "--backends",
      "--frontends",
      "--policy",
      "--seed",
      "--idle-timeout-ms",
      "--no-onnx",
      "--summary-json",
      "--kairos",
      "--types",
      "--profiles",
    ]) {
      expect(out).toContain(flag);
    }
  });
});
