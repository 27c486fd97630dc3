import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ModelProto } from "./onnx-proto.js";
import { buildResnet18Onnx, ensureResnet18Onnx, generatedResnet18, RESNET18_SEED, resnet18Path } from "./resnet-onnx.js";

interface DecodedAttribute {
  name: string;
  i?: number;
  ints?: number[];
}
interface DecodedNode {
  opType: string;
  name: string;
  input: string[];
  output: string[];
  attribute: DecodedAttribute[];
}
interface DecodedValueInfo {
  name: string;
  type: { tensorType: { elemType: number; shape: { dim: { dimValue?: number; dimParam?: string }[] } } };
}
interface DecodedModel {
  irVersion: number;
  opsetImport: { domain: string; version: number }[];
  graph: {
    node: DecodedNode[];
    initializer: { name: string; dims: number[]; rawData: Uint8Array }[];
    input: DecodedValueInfo[];
    output: DecodedValueInfo[];
  };
}

const sha256 = (bytes: Uint8Array): string => createHash("sha256").update(bytes).digest("hex");

describe("ResNet-18 as ONNX", () => {
  // One build serves every test of the file (about 2 s).
  const model = buildResnet18Onnx();
  const decoded = ModelProto.toObject(ModelProto.decode(model.bytes), { longs: Number, defaults: false, arrays: true }) as DecodedModel;
  const tmp = mkdtempSync(join(tmpdir(), "resnet18-"));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it("has torchvision's ResNet-18 parameter count less the folded batch norms", () => {
    // torchvision's resnet18 has 11,689,512 parameters; folding its 4,800 batch-norm channels (scale and shift,
    // 9,600) into one bias per channel leaves 11,684,712.
    expect(model.parameters).toBe(11_684_712);
    const fromFile = decoded.graph.initializer.reduce((n, t) => n + t.dims.reduce((a, b) => a * b, 1), 0);
    expect(fromFile).toBe(11_684_712);
    for (const t of decoded.graph.initializer) expect(t.rawData.byteLength).toBe(4 * t.dims.reduce((a, b) => a * b, 1));
    expect(model.bytes.byteLength).toBeGreaterThan(46_000_000);
  });

  it("is ResNet-18's graph on opset 17: 20 convolutions, 8 residual adds, pooling and a 512 -> 1000 Gemm", () => {
    expect(decoded.irVersion).toBe(8);
    expect(decoded.opsetImport).toEqual([{ version: 17 }]);
    const count = (op: string) => decoded.graph.node.filter((n) => n.opType === op).length;
    expect(count("Conv")).toBe(20);
    expect(count("Relu")).toBe(17);
    expect(count("Add")).toBe(8);
    expect([count("MaxPool"), count("GlobalAveragePool"), count("Flatten"), count("Gemm")]).toEqual([1, 1, 1, 1]);
    expect(decoded.graph.node).toHaveLength(49);
    const conv1 = decoded.graph.node[0];
    expect(conv1?.input[0]).toBe("input");
    const attr = (n: DecodedNode | undefined, name: string) => n?.attribute.find((a) => a.name === name);
    expect(attr(conv1, "kernel_shape")?.ints).toEqual([7, 7]);
    expect(attr(conv1, "strides")?.ints).toEqual([2, 2]);
    const downsamples = decoded.graph.node.filter((n) => n.name.endsWith(".downsample"));
    expect(downsamples.map((n) => n.name)).toEqual(["layer2.0.downsample", "layer3.0.downsample", "layer4.0.downsample"]);
    for (const d of downsamples) expect(attr(d, "strides")?.ints).toEqual([2, 2]);
    const fcWeight = decoded.graph.initializer.find((t) => t.name === "fc.weight");
    expect(fcWeight?.dims).toEqual([1000, 512]);
    expect(decoded.graph.node.at(-1)).toMatchObject({ opType: "Gemm", output: ["logits"] });
  });

  it("takes [N, 3, 224, 224] with a free batch and gives [N, 1000]", () => {
    const dims = (v: DecodedValueInfo | undefined) => v?.type.tensorType.shape.dim.map((d) => d.dimParam ?? d.dimValue);
    expect(decoded.graph.input.map((v) => v.name)).toEqual(["input"]);
    expect(dims(decoded.graph.input[0])).toEqual(["N", 3, 224, 224]);
    expect(decoded.graph.output.map((v) => v.name)).toEqual(["logits"]);
    expect(dims(decoded.graph.output[0])).toEqual(["N", 1000]);
  });

  it("draws He-normal weights: conv1's standard deviation is sqrt(2 / (3 * 7 * 7))", () => {
    const t = decoded.graph.initializer.find((x) => x.name === "conv1.weight");
    if (!t) throw new Error("no conv1.weight");
    const w = new Float32Array(t.rawData.buffer.slice(t.rawData.byteOffset, t.rawData.byteOffset + t.rawData.byteLength));
    const mean = w.reduce((a, b) => a + b, 0) / w.length;
    const std = Math.sqrt(w.reduce((a, b) => a + (b - mean) ** 2, 0) / w.length);
    expect(Math.abs(mean)).toBeLessThan(0.01);
    expect(std).toBeCloseTo(Math.sqrt(2 / 147), 2);
  });

  it("is the same file on every generation from the seed", () => {
    const file = join(tmp, "resnet18.onnx");
    expect(ensureResnet18Onnx(file)).toEqual({ path: file, written: true });
    expect(sha256(readFileSync(file))).toBe(sha256(model.bytes));
    expect(ensureResnet18Onnx(file)).toEqual({ path: file, written: false });
    expect(decoded.graph.initializer.length).toBeGreaterThan(0);
    expect(RESNET18_SEED).toBe(18);
  });

  it("says to run setup when the file is missing, and points the catalogue at the generated path", () => {
    expect(() => generatedResnet18(join(tmp, "missing.onnx"))).toThrow(
      /model "resnet18" has not been generated \(.*missing\.onnx is missing\): run npm run setup/,
    );
    expect(resnet18Path()).toMatch(/libs\/models\/generated\/resnet18\.onnx$/);
    ensureResnet18Onnx();
    expect(statSync(generatedResnet18()).size).toBe(model.bytes.byteLength);
  });
});
