import type { TensorValue } from "./types.js";

export const OCR_CLS_HEIGHT = 48;
export const OCR_CLS_WIDTH = 192;
export const OCR_CLS_OUTPUT = "softmax_0.tmp_0";

/** 5x7 bitmap glyphs, enough for the sample word. */
const GLYPHS: Readonly<Record<string, readonly string[]>> = {
  I: ["11111", "00100", "00100", "00100", "00100", "00100", "11111"],
  N: ["10001", "11001", "10101", "10011", "10001", "10001", "10001"],
  F: ["11111", "10000", "10000", "11110", "10000", "10000", "10000"],
  E: ["11111", "10000", "10000", "11110", "10000", "10000", "11111"],
  R: ["11110", "10001", "10001", "11110", "10100", "10010", "10001"],
  G: ["01110", "10001", "10000", "10111", "10001", "10001", "01111"],
  D: ["11110", "10001", "10001", "10001", "10001", "10001", "11110"],
};

const SAMPLE_TEXT = "INFERGRID";
// Each font pixel becomes 3 wide and 4 high, so the word fills columns 4..186 and rows 10..37: the
// proportions of a real cropped text line, which the classifier needs to be confident.
const SCALE_X = 3;
const SCALE_Y = 4;
const TOP = 10;
const LEFT = 4;
const GAP = 6;
const INK = 20;
const PAPER = 255;

/** Grey pixels (0..255), row-major, dark text on white. */
function renderSampleLine(): Uint8Array {
  const pixels = new Uint8Array(OCR_CLS_HEIGHT * OCR_CLS_WIDTH).fill(PAPER);
  let left = LEFT;
  for (const ch of SAMPLE_TEXT) {
    const glyph = GLYPHS[ch];
    if (!glyph) throw new Error(`no glyph for ${ch}`);
    glyph.forEach((row, r) => {
      for (let c = 0; c < row.length; c++) {
        if (row[c] !== "1") continue;
        for (let dy = 0; dy < SCALE_Y; dy++) {
          const rowStart = (TOP + r * SCALE_Y + dy) * OCR_CLS_WIDTH;
          pixels.fill(INK, rowStart + left + c * SCALE_X, rowStart + left + (c + 1) * SCALE_X);
        }
      }
    });
    left += 5 * SCALE_X + GAP;
  }
  return pixels;
}

/**
 * A fixed synthetic text line (the word INFERGRID in a 5x7 bitmap font), as the classifier's input x
 * [1, 3, 48, 192], normalised like PaddleOCR does. "flipped" is the same image rotated by 180 degrees.
 */
export function makeOcrClsSampleInput(kind: "upright" | "flipped"): { x: TensorValue & { data: Float32Array } } {
  const pixels = renderSampleLine();
  const plane = OCR_CLS_HEIGHT * OCR_CLS_WIDTH;
  const data = new Float32Array(3 * plane);
  for (let i = 0; i < plane; i++) {
    // Rotating by 180 degrees reverses the row-major pixel order.
    const grey = pixels[kind === "upright" ? i : plane - 1 - i] ?? PAPER;
    const v = (grey / 255 - 0.5) / 0.5;
    data[i] = v;
    data[plane + i] = v;
    data[2 * plane + i] = v;
  }
  return { x: { dims: [1, 3, OCR_CLS_HEIGHT, OCR_CLS_WIDTH], data } };
}

export interface OcrClsLabel {
  label: "0" | "180";
  confidence: number;
}

/** Reads the first item of the batch. */
export function interpretOcrCls(outputs: Record<string, TensorValue>): OcrClsLabel {
  const probs = outputs[OCR_CLS_OUTPUT];
  const p0 = probs?.data[0];
  const p180 = probs?.data[1];
  if (p0 === undefined || p180 === undefined) throw new Error(`outputs have no "${OCR_CLS_OUTPUT}" with two probabilities`);
  return p180 > p0 ? { label: "180", confidence: p180 } : { label: "0", confidence: p0 };
}
