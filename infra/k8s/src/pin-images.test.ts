import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { main, parseDigests, pinImages, readDigestFile, releasedOverlays, unpinnedImages } from "./pin-images.js";
import { findKubectl, k8sRoot, render, validate } from "./render.js";

const kubectl = findKubectl();
const digestOf = (seed: string) => `sha256:${Buffer.from(seed.padEnd(32, ".")).toString("hex").slice(0, 64)}`;

describe("pin-images: parsing digests", () => {
  it("reads `<image> <digest>` and `<image>@<digest>` lines, skipping blanks and comments", () => {
    const d = digestOf("a");
    expect(parseDigests(`# pushed 2025-01-01\nghcr.io/infergrid/broker ${d}\n\nnats@${d}\n`)).toEqual(
      new Map([
        ["ghcr.io/infergrid/broker", d],
        ["nats", d],
      ]),
    );
  });

  it("refuses anything that is not a sha256 digest, and an image given two digests", () => {
    expect(() => parseDigests("ghcr.io/infergrid/broker 0.1.0")).toThrow(/line 1/);
    expect(() => parseDigests("ghcr.io/infergrid/broker sha256:abc")).toThrow(/line 1/);
    expect(() => parseDigests(`x ${digestOf("a")}\nx ${digestOf("b")}`)).toThrow(/two digests/);
  });

  it("reads a podman --digestfile", () => {
    const dir = mkdtempSync(join(tmpdir(), "pin-"));
    try {
      writeFileSync(join(dir, "ok"), `${digestOf("a")}\n`);
      writeFileSync(join(dir, "bad"), "latest\n");
      expect(readDigestFile(join(dir, "ok"))).toBe(digestOf("a"));
      expect(() => readDigestFile(join(dir, "bad"))).toThrow(/not a sha256 digest/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe.skipIf(!kubectl)("pin-images: the released overlays", () => {
  const kustomization = (overlay: string) => readFileSync(join(k8sRoot, "overlays", overlay, "kustomization.yaml"), "utf8");
  // Every image the released overlays name, with a made-up digest each.
  const images = [...new Set(releasedOverlays.flatMap((o) => pinImages(kustomization(o), new Map()).missing))];
  const digests = new Map(images.map((image) => [image, digestOf(image)]));
  const tree = mkdtempSync(join(tmpdir(), "k8s-pinned-"));
  afterAll(() => rmSync(tree, { recursive: true, force: true }));

  it("sets a digest on every images entry, keeping the tag, the comments and the other entries' fields", () => {
    const result = pinImages(kustomization("production"), digests);
    expect(result.missing).toEqual([]);
    expect(result.pinned.sort()).toEqual(
      [
        "ghcr.io/infergrid/backend-worker",
        "ghcr.io/infergrid/broker",
        "ghcr.io/infergrid/console",
        "ghcr.io/infergrid/frontend",
        "ghcr.io/infergrid/global-allocator",
        "ghcr.io/infergrid/predictor",
        "nats",
      ].sort(),
    );
    expect(result.text).toContain("# Production: released images");
    expect(result.text).toContain(`    newTag: 0.1.0\n    digest: ${digestOf("ghcr.io/infergrid/broker")}`);
    // Without a digest for an image, it says which, and leaves that entry alone.
    const partial = pinImages(kustomization("production"), new Map([...digests].filter(([image]) => image !== "nats")));
    expect(partial.missing).toEqual(["nats"]);
  });

  it("renders, once pinned, to valid objects that pull every image by its digest", () => {
    for (const dir of ["base", "monitoring", "overlays"]) cpSync(join(k8sRoot, dir), join(tree, dir), { recursive: true });
    const lines = [...digests].map(([image, digest]) => `${image} ${digest}`).join("\n");
    writeFileSync(join(tree, "digests.txt"), `${lines}\n`);
    expect(main(["--digests", join(tree, "digests.txt")], tree)).toBe(0);
    for (const overlay of releasedOverlays) {
      const objects = render(`overlays/${overlay}`, kubectl, tree);
      expect(validate(objects), overlay).toEqual([]);
      expect(unpinnedImages(objects), overlay).toEqual([]);
      const pulled = objects.flatMap(
        (o) => (o as { spec?: { template?: { spec?: { containers?: { image: string }[] } } } }).spec?.template?.spec?.containers ?? [],
      );
      for (const c of pulled) {
        const [nameAndTag, digest] = c.image.split("@");
        expect(digest, c.image).toBe(digestOf(nameAndTag!.replace(/:[^:/]+$/, "").replace(/^docker\.io\/library\//, "")));
      }
    }
    expect(main(["--check"], tree)).toBe(0);
  });

  it("refuses to release the overlays as they are in git: release pinning is pending, every image pulled by tag", () => {
    const pending = unpinnedImages(render("overlays/production", kubectl));
    expect(pending).toHaveLength(7);
    for (const image of pending) expect(image).toMatch(/:[0-9][\w.-]*$/);
    expect(main(["--check"])).toBe(1);
  });
});
