/** Setup's step that writes the generated models (ResNet-18) when they are missing: `node libs/models/dist/generate-models.js`. */
import { ensureResnet18Onnx } from "./resnet-onnx.js";

const started = performance.now();
const { path, written } = ensureResnet18Onnx();
const took = ((performance.now() - started) / 1000).toFixed(1);
process.stderr.write(written ? `resnet18: wrote ${path} in ${took} s\n` : `resnet18: ${path} is there\n`);
