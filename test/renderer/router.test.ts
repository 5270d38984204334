// The hash router: parse and build are inverse, unknown views fall back to Runs.
import { describe, expect, it } from 'vitest'

import { hashOf, parseHash } from '../../renderer/router'

describe('hash router', () => {
  it('round-trips a view, its run id and its query', () => {
    const route = { view: 'compare' as const, id: null, query: { ids: 'a,b', metric: 'loss' } }
    expect(parseHash(hashOf(route))).toEqual(route)
    expect(parseHash(hashOf({ view: 'run', id: 'tiny-x1', query: {} }))).toEqual({ view: 'run', id: 'tiny-x1', query: {} })
  })

  it('falls back to the runs view for an empty or unknown hash', () => {
    expect(parseHash('').view).toBe('runs')
    expect(parseHash('#/nope/3').view).toBe('runs')
  })
})
