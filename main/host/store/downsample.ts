// Reducing a long series to what a chart can draw without hiding what matters.

/** Start index of bucket b when n items are split into `buckets` contiguous, near-equal buckets. */
export function bucketStart(n: number, buckets: number, b: number): number {
  return Math.floor((b * n) / buckets)
}

/**
 * Indices (ascending, unique) of at most `maxPoints` rows that keep every column's shape: the first
 * and last rows, and for each bucket of the rows between them the row holding each column's minimum
 * and maximum, so a one-step spike survives. Rows share one step axis, so a bucket can contribute
 * 2 rows per column and the bucket count is (maxPoints - 2) / (2 * columns). NaN (a non-finite or
 * missing value) never wins a bucket.
 */
export function minMaxIndices(columns: readonly Float64Array[], n: number, maxPoints: number): number[] {
  if (n <= maxPoints) return Array.from({ length: n }, (_, i) => i)
  const buckets = Math.floor((maxPoints - 2) / (2 * Math.max(1, columns.length)))
  const interior = n - 2
  const picked = [0]
  for (let b = 0; b < buckets; b++) {
    const lo = 1 + bucketStart(interior, buckets, b)
    const hi = 1 + bucketStart(interior, buckets, b + 1)
    const chosen = new Set<number>()
    for (const values of columns) {
      let minAt = -1
      let maxAt = -1
      for (let i = lo; i < hi; i++) {
        const v = values[i]
        if (Number.isNaN(v)) continue
        if (minAt < 0 || v < values[minAt]) minAt = i
        if (maxAt < 0 || v > values[maxAt]) maxAt = i
      }
      if (minAt >= 0) chosen.add(minAt).add(maxAt)
    }
    picked.push(...[...chosen].sort((x, y) => x - y))
  }
  picked.push(n - 1)
  return picked
}
