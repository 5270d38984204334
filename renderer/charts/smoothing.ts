// Exponential moving average smoothing as TensorBoard draws it. A plain EMA starts at 0 and
// drags the first points down; dividing by (1 - weight^n) removes that start-up bias, so the
// smoothed curve begins on the data. Missing values (null, non-finite) stay missing and do not
// advance the average.

export type SeriesValue = number | null

/** weight in [0, 1): 0 returns the data unchanged; 0.99 is very smooth. Values outside are clamped. */
export function emaSmooth(values: readonly SeriesValue[], weight: number): SeriesValue[] {
  const w = clampWeight(weight)
  if (w === 0) return values.map((v) => (v !== null && Number.isFinite(v) ? v : null))
  let last = 0
  let count = 0
  return values.map((v) => {
    if (v === null || !Number.isFinite(v)) return null
    last = last * w + (1 - w) * v
    count += 1
    const debias = 1 - Math.pow(w, count)
    return last / debias
  })
}

/** Smooths [x, y] pairs, keeping x. */
export function emaSmoothPoints(
  points: readonly (readonly [number, SeriesValue])[],
  weight: number,
): [number, SeriesValue][] {
  const smoothed = emaSmooth(
    points.map((p) => p[1]),
    weight,
  )
  return points.map((p, i) => [p[0], smoothed[i] ?? null])
}

function clampWeight(weight: number): number {
  if (!Number.isFinite(weight) || weight <= 0) return 0
  return Math.min(weight, 0.999)
}
