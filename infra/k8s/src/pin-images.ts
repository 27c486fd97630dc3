import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { isMap, isSeq, parseDocument } from "yaml";
import { findKubectl, type K8sObject, k8sRoot, render } from "./render.js";

/**
 * Release pinning: a tag can be moved to other bytes after review, a digest cannot. The overlays in git
 * keep tags (nothing is pushed from here); a release pins every image of the released overlays by the
 * digest the registry returned on push, and `--check` refuses a render that still pulls by tag.
 *
 *   pin-images --digests <file>              lines `<image> sha256:<hex>` or `<image>@sha256:<hex>`
 *   pin-images --digestfile <image>=<path>   a `podman push --digestfile <path>` output, for <image> (repeatable)
 *   pin-images --check                       exits 1, listing them, while a released overlay pulls an image by tag
 *   --overlay <name>                         which overlays (repeatable; default: production and heterogeneous)
 *
 * <image> is what an overlay's `images:` entry pulls (its newName, else its name: ghcr.io/infergrid/broker, nats).
 */

const DIGEST = /^sha256:[0-9a-f]{64}$/;

/** The overlays a release ships (heterogeneous adds its own backend images entry on top of production). */
export const releasedOverlays = ["production", "heterogeneous"] as const;

/** `<image> <digest>` or `<image>@<digest>` per line; blank lines and `#` comments are skipped. */
export function parseDigests(text: string): Map<string, string> {
  const digests = new Map<string, string>();
  text.split("\n").forEach((raw, i) => {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) return;
    const [image, digest, ...rest] = line.split(line.includes("@") ? "@" : /\s+/);
    if (image === undefined || digest === undefined || rest.length > 0 || !DIGEST.test(digest)) {
      throw new Error(`line ${i + 1}: expected "<image> sha256:<64 hex>", got ${JSON.stringify(raw)}`);
    }
    const known = digests.get(image);
    if (known !== undefined && known !== digest) throw new Error(`line ${i + 1}: ${image} has two digests`);
    digests.set(image, digest);
  });
  return digests;
}

/** The digest a `podman push --digestfile` wrote (the file holds only the digest). */
export function readDigestFile(path: string): string {
  const digest = readFileSync(path, "utf8").trim();
  if (!DIGEST.test(digest)) throw new Error(`${path}: not a sha256 digest: ${JSON.stringify(digest)}`);
  return digest;
}

export interface PinResult {
  /** The kustomization with each images entry's digest set (comments and order kept). */
  text: string;
  pinned: string[];
  /** Images the overlay pulls for which no digest was given. */
  missing: string[];
}

/**
 * Sets `digest` on every `images:` entry of a kustomization whose image has one in `digests`. The tag stays
 * beside it for people (kustomize renders `name:tag@digest`; the runtime pulls by the digest).
 */
export function pinImages(kustomization: string, digests: ReadonlyMap<string, string>): PinResult {
  const doc = parseDocument(kustomization);
  const images = doc.get("images");
  const pinned: string[] = [];
  const missing: string[] = [];
  if (!isSeq(images)) return { text: kustomization, pinned, missing };
  for (const entry of images.items) {
    if (!isMap(entry)) continue;
    const newName = entry.get("newName");
    const name = entry.get("name");
    const image = typeof newName === "string" ? newName : typeof name === "string" ? name : undefined;
    if (image === undefined) continue;
    const digest = digests.get(image);
    if (digest === undefined) {
      missing.push(image);
      continue;
    }
    entry.set("digest", digest);
    pinned.push(image);
  }
  return { text: doc.toString(), pinned, missing };
}

/** Every container image of the rendered objects that is not pulled by digest (empty when all are pinned). */
export function unpinnedImages(objects: readonly K8sObject[]): string[] {
  const images = new Set<string>();
  for (const o of objects) {
    const spec = (o as { spec?: { template?: { spec?: { containers?: { image?: string }[]; initContainers?: { image?: string }[] } } } })
      .spec?.template?.spec;
    for (const c of [...(spec?.containers ?? []), ...(spec?.initContainers ?? [])]) {
      if (c.image !== undefined && !/@sha256:[0-9a-f]{64}$/.test(c.image)) images.add(c.image);
    }
  }
  return [...images].sort();
}

interface CliOptions {
  check: boolean;
  digests: Map<string, string>;
  overlays: string[];
}

function parseArgs(argv: readonly string[]): CliOptions {
  const options: CliOptions = { check: false, digests: new Map(), overlays: [] };
  const add = (image: string, digest: string) => {
    const known = options.digests.get(image);
    if (known !== undefined && known !== digest) throw new Error(`${image} has two digests`);
    options.digests.set(image, digest);
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${arg} needs a value`);
      return v;
    };
    if (arg === "--check") options.check = true;
    else if (arg === "--digests") for (const [image, digest] of parseDigests(readFileSync(value(), "utf8"))) add(image, digest);
    else if (arg === "--digestfile") {
      const v = value();
      const eq = v.indexOf("=");
      if (eq <= 0) throw new Error(`--digestfile takes <image>=<path>, got ${v}`);
      add(v.slice(0, eq), readDigestFile(v.slice(eq + 1)));
    } else if (arg === "--overlay") options.overlays.push(value());
    else throw new Error(`unknown argument ${arg} (see the comment at the top of infra/k8s/src/pin-images.ts)`);
  }
  if (options.overlays.length === 0) options.overlays = [...releasedOverlays];
  if (!options.check && options.digests.size === 0) throw new Error("give --digests <file> or --digestfile <image>=<path>, or --check");
  return options;
}

/** The CLI; `root` is the infra/k8s tree it reads and rewrites. Returns the exit status. */
export function main(argv: readonly string[], root = k8sRoot): number {
  const options = parseArgs(argv);
  if (options.check) {
    let unpinned = 0;
    for (const overlay of options.overlays) {
      const images = unpinnedImages(render(`overlays/${overlay}`, findKubectl(), root));
      unpinned += images.length;
      for (const image of images) process.stderr.write(`overlays/${overlay}: pulled by tag, not digest: ${image}\n`);
    }
    if (unpinned > 0) {
      process.stderr.write("not releasable: pin the images first (pin-images --digests <file>)\n");
      return 1;
    }
    process.stdout.write(`every image of ${options.overlays.join(", ")} is pinned by digest\n`);
    return 0;
  }
  // All overlays or none: a release half pinned would pull some images by tag.
  const results = options.overlays.map((overlay) => {
    const path = join(root, "overlays", overlay, "kustomization.yaml");
    return { overlay, path, ...pinImages(readFileSync(path, "utf8"), options.digests) };
  });
  const missing = results.flatMap((r) => r.missing.map((image) => `overlays/${r.overlay}: no digest given for ${image}`));
  if (missing.length > 0) {
    process.stderr.write(`${missing.join("\n")}\nnothing written\n`);
    return 1;
  }
  for (const r of results) {
    writeFileSync(r.path, r.text);
    process.stdout.write(`overlays/${r.overlay}: pinned ${r.pinned.join(", ")}\n`);
  }
  return 0;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    process.exitCode = main(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`pin-images: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 2;
  }
}
