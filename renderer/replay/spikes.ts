// Imbalance spikes: maximal runs of consecutive steps whose ratio is above a threshold, each found by
// its peak, so "next spike" jumps over a whole episode instead of crawling through it step by step.

export interface Spike {
  /** The step of the highest ratio inside the episode (where a jump lands). */
  step: number
  ratio: number
  firstStep: number
  lastStep: number
}

/** steps and ratios are aligned and steps ascend; NaN ratios (no data) end an episode. */
export function findSpikes(steps: ArrayLike<number>, ratios: ArrayLike<number>, threshold: number): Spike[] {
  const spikes: Spike[] = []
  let current: Spike | null = null
  for (let i = 0; i < ratios.length; i++) {
    const ratio = ratios[i]!
    const step = steps[i]!
    if (ratio > threshold) {
      if (!current) current = { step, ratio, firstStep: step, lastStep: step }
      else {
        current.lastStep = step
        if (ratio > current.ratio) Object.assign(current, { step, ratio })
      }
    } else if (current) {
      spikes.push(current)
      current = null
    }
  }
  if (current) spikes.push(current)
  return spikes
}

/** The first spike whose peak is after `step`. */
export function nextSpike(spikes: readonly Spike[], step: number): Spike | undefined {
  let lo = 0
  let hi = spikes.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (spikes[mid]!.step <= step) lo = mid + 1
    else hi = mid
  }
  return spikes[lo]
}

/** The last spike whose peak is before `step`. */
export function previousSpike(spikes: readonly Spike[], step: number): Spike | undefined {
  let lo = 0
  let hi = spikes.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (spikes[mid]!.step < step) lo = mid + 1
    else hi = mid
  }
  return spikes[lo - 1]
}
