/**
 * The k-th smallest of the first n values of a buffer (k from 0), by quickselect: what sorting them and reading
 * index k gives, in linear expected time. The buffer's first n values are reordered. No NaN: latencies.
 */
export function kthSmallest(xs: Float64Array, n: number, k: number): number {
  if (!(k >= 0 && k < n)) throw new RangeError(`kthSmallest: k ${k} outside 0..${n - 1}`);
  let lo = 0;
  let hi = n - 1;
  while (hi > lo) {
    // Median of three as the pivot: sorted or constant runs (common in latencies) stay linear.
    const mid = (lo + hi) >>> 1;
    const a = xs[lo] as number;
    const b = xs[mid] as number;
    const c = xs[hi] as number;
    const pivot = Math.max(Math.min(a, b), Math.min(Math.max(a, b), c));
    // Hoare partition: [lo, j] <= pivot <= [i, hi].
    let i = lo;
    let j = hi;
    while (i <= j) {
      while ((xs[i] as number) < pivot) i++;
      while ((xs[j] as number) > pivot) j--;
      if (i <= j) {
        const t = xs[i] as number;
        xs[i] = xs[j] as number;
        xs[j] = t;
        i++;
        j--;
      }
    }
    if (k <= j) hi = j;
    else if (k >= i) lo = i;
    else return xs[k] as number;
  }
  return xs[k] as number;
}
