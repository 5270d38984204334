// The Run view's badge for a routing-skew experiment, so a skewed run is never read as a trained router's.
import { describe, expect, it } from 'vitest'

import { RunConfigSchema } from '../../main/api/config'
import { routingSkewLabel } from '../../renderer/views/run/routing-skew-label'
import { tinyConfig } from './compare-fixtures'

describe('routing skew badge', () => {
  const skewed = (routing_skew: object) => RunConfigSchema.parse({ ...tinyConfig, routing_skew })

  it('names the distribution and its parameter, and says it is an experiment', () => {
    expect(routingSkewLabel(skewed({ distribution: 'hot' }))?.badge).toBe('routing skew: hot 95% (experiment)')
    expect(routingSkewLabel(skewed({ distribution: 'hot', hot_fraction: 0.125 }))?.badge).toBe('routing skew: hot 12.5% (experiment)')
    expect(routingSkewLabel(skewed({ distribution: 'zipf', zipf_s: 2 }))?.badge).toBe('routing skew: zipf s=2 (experiment)')
    expect(routingSkewLabel(skewed({ distribution: 'uniform', seed: 3 }))).toEqual({
      badge: 'routing skew: uniform (experiment)',
      title: "The router's choices were replaced by seeded draws (seed 3): experts drawn uniformly. The rest of each step is real.",
    })
  })

  it('is absent when the router routed', () => {
    expect(routingSkewLabel(tinyConfig)).toBeNull()
    expect(routingSkewLabel(skewed({ distribution: 'none' }))).toBeNull()
  })
})
