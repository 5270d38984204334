// Where a step falls in a (possibly bucketed) expert-load answer, and the aligned windows the
// heatmap fetches at full resolution when zoomed in.

/** Index of the last entry of ascending `steps` that is ≤ step (the bucket holding it); -1 before the first. */
export function bucketOf(steps: ArrayLike<number>, step: number): number {
  let lo = 0
  let hi = steps.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (steps[mid]! <= step) lo = mid + 1
    else hi = mid
  }
  return lo - 1
}

export interface StepWindow {
  fromStep: number
  toStep: number
}

/**
 * The window of `size` steps holding `step`, aligned to multiples of size (so scrubbing inside it,
 * or coming back to it, reuses one cached answer), clipped to the run's steps.
 */
export function alignedWindow(step: number, size: number, first: number, last: number): StepWindow {
  const start = Math.floor((step - first) / size) * size + first
  return { fromStep: Math.max(first, start), toStep: Math.min(last, start + size - 1) }
}
