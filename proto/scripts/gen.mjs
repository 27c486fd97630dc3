// Compiles every .proto under infergrid/ into one typed static module (protobufjs), once, at
// build time. The output goes to src/gen (read by tsc and by tests from source) and dist/gen
// (loaded at run time next to the compiled index.js).
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, readdirSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const bin = (name) => join(root, "node_modules", ".bin", name);

function protoFiles(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return protoFiles(path);
    return name.endsWith(".proto") ? [path.slice(root.length + 1)] : [];
  });
}

const files = protoFiles(join(root, "infergrid")).sort();
mkdirSync(join(root, "src", "gen"), { recursive: true });
const js = join("src", "gen", "messages.js");
const dts = join("src", "gen", "messages.d.ts");
execFileSync(bin("pbjs"), ["-t", "static-module", "-w", "es6", "--force-number", "--no-beautify", "-p", ".", "-o", js, ...files], {
  cwd: root,
  stdio: "inherit",
});
execFileSync(bin("pbts"), ["-o", dts, js], { cwd: root, stdio: "inherit" });
mkdirSync(join(root, "dist", "gen"), { recursive: true });
copyFileSync(join(root, js), join(root, "dist", "gen", "messages.js"));
copyFileSync(join(root, dts), join(root, "dist", "gen", "messages.d.ts"));
console.log(`proto: generated ${files.length} files -> ${js}`);
