// EMA smoothing with TensorBoard's debias.
import { describe, expect, it } from 'vitest'

import { emaSmooth, emaSmoothPoints } from '../../renderer/charts/smoothing'

describe('emaSmooth', () => {
  it('starts on the data (debiased) and follows the EMA recurrence', () => {
    const [a, b, c] = emaSmooth([1, 2, 4], 0.5) as number[]
    expect(a).toBeCloseTo(1, 12) // (0.5 * 1) / (1 - 0.5)
    expect(b).toBeCloseTo((0.25 + 1) / 0.75, 12)
    expect(c).toBeCloseTo((0.625 + 2) / 0.875, 12)
  })

  it('keeps a constant series constant at any weight', () => {
    for (const w of [0.1, 0.6, 0.99]) for (const v of emaSmooth([3, 3, 3, 3], w)) expect(v).toBeCloseTo(3, 10)
  })

  it('returns the data for weight 0 and clamps out-of-range weights', () => {
    expect(emaSmooth([1, 5, 2], 0)).toEqual([1, 5, 2])
    expect(emaSmooth([1, 5, 2], -1)).toEqual([1, 5, 2])
    expect(emaSmooth([1, 5], 1).every((v) => v !== null && Number.isFinite(v))).toBe(true)
  })

  it('leaves missing values missing without advancing the average', () => {
    const smoothed = emaSmooth([2, null, Number.NaN, 4], 0.5)
    expect(smoothed[1]).toBeNull()
    expect(smoothed[2]).toBeNull()
    expect(smoothed[3]).toBeCloseTo((0.5 + 2) / 0.75, 12) // as if [2, 4]
  })

  it('handles empty input and keeps x of points', () => {
    expect(emaSmooth([], 0.9)).toEqual([])
    expect(emaSmoothPoints([[10, 1], [20, 3]], 0.5).map((p) => p[0])).toEqual([10, 20])
  })
})
