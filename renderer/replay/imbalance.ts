// Expert-load imbalance: the ratio of the busiest expert's tokens to the mean over the layer's experts
// (1 = perfectly balanced, E = every token on one of E experts), per step and as a distribution.

/** max / mean of counts[offset .. offset + experts); NaN when the row carries no tokens. */
export function imbalanceRatio(counts: ArrayLike<number>, offset: number, experts: number): number {
  let max = 0
  let sum = 0
  for (let e = 0; e < experts; e++) {
    const tokens = counts[offset + e] ?? 0
    sum += tokens
    if (tokens > max) max = tokens
  }
  return sum > 0 ? (max * experts) / sum : Number.NaN
}

/** One ratio per row of a steps × experts row-major matrix. */
export function imbalanceSeries(counts: ArrayLike<number>, experts: number): Float64Array {
  const rows = experts > 0 ? Math.floor(counts.length / experts) : 0
  const ratios = new Float64Array(rows)
  for (let row = 0; row < rows; row++) ratios[row] = imbalanceRatio(counts, row * experts, experts)
  return ratios
}

/** The q-quantile (0..1, nearest rank) of the finite values; NaN when there are none. */
export function quantile(values: ArrayLike<number>, q: number): number {
  const finite = Array.from(values).filter(Number.isFinite).sort((a, b) => a - b)
  if (finite.length === 0) return Number.NaN
  const rank = Math.min(finite.length - 1, Math.max(0, Math.ceil(q * finite.length) - 1))
  return finite[rank]!
}
