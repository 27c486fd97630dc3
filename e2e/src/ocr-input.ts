import type { inference } from "@infergrid/proto";

/**
 * A fixed synthetic text line for the PaddleOCR direction classifier ([1, 3, 48, 192], values
 * normalised to [-1, 1]): dark glyph-like strokes on a light background, ascenders on top.
 * `flipped` is the same image turned by 180 degrees.
 */
export function ocrClsInput(kind: "upright" | "flipped"): Record<string, inference.Tensor.$Properties> {
  const h = 48;
  const w = 192;
  const plane = new Array<number>(h * w).fill(1);
  for (let g = 0; g < 12; g++) {
    const x0 = 8 + g * 15;
    for (let y = 14; y < 38; y++) for (let x = x0; x < x0 + 3; x++) plane[y * w + x] = -1;
    for (let x = x0; x < x0 + 10; x++) for (let y = 34; y < 38; y++) plane[y * w + x] = -1;
    if (g % 3 === 0) for (let y = 4; y < 14; y++) for (let x = x0; x < x0 + 3; x++) plane[y * w + x] = -1;
  }
  const img = kind === "upright" ? plane : plane.slice().reverse();
  return { x: { dims: [1, 3, h, w], data: [...img, ...img, ...img] } };
}
