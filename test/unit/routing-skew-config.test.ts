// The run config's routing_skew section (a load-balance experiment: seeded draws replace the router's
// choices) and the engine config a run's engine receives: the section only when a distribution is on.
import { describe, expect, it } from 'vitest'

import { RunConfigSchema, type RoutingSkewConfig } from '../../main/api/config'
import { issuesOf } from '../../main/api/contract'
import { engineConfigJson } from '../../main/host/runs/engine-config'

const model = { arch: 'mixtral', vocab_size: 64, d_model: 32, n_layers: 2, n_heads: 4, max_seq_len: 16, d_ff: 48, n_experts: 4, top_k: 2 }
const train = { batch_size: 2, seq_len: 16 }

const config = (routing_skew?: Partial<RoutingSkewConfig>) => RunConfigSchema.parse({ model, train, ...(routing_skew ? { routing_skew } : {}) })

function issues(routing_skew: object): string[] {
  const parsed = RunConfigSchema.safeParse({ model, train, routing_skew })
  return parsed.success ? [] : issuesOf(parsed.error).map((i) => i.path)
}

describe('routing skew config', () => {
  it('is off by default, and an omitted section stays omitted', () => {
    expect(config().routing_skew).toBeUndefined()
    expect(config({}).routing_skew).toEqual({ distribution: 'none', zipf_s: 1.2, hot_fraction: 0.95, seed: 0 })
    expect(config({ distribution: 'zipf', zipf_s: 2 }).routing_skew).toEqual({ distribution: 'zipf', zipf_s: 2, hot_fraction: 0.95, seed: 0 })
  })

  it('takes the engine’s ranges, inclusive at both ends', () => {
    for (const ok of [{ zipf_s: 0 }, { zipf_s: 10 }, { hot_fraction: 0 }, { hot_fraction: 1 }, { seed: Number.MAX_SAFE_INTEGER }])
      expect(issues({ distribution: 'hot', ...ok })).toEqual([])
    expect(issues({ zipf_s: -0.1 })).toEqual(['routing_skew.zipf_s'])
    expect(issues({ zipf_s: 10.5 })).toEqual(['routing_skew.zipf_s'])
    expect(issues({ hot_fraction: 1.01 })).toEqual(['routing_skew.hot_fraction'])
    expect(issues({ seed: -1 })).toEqual(['routing_skew.seed'])
    expect(issues({ seed: 1.5 })).toEqual(['routing_skew.seed'])
    expect(issues({ distribution: 'pareto' })).toEqual(['routing_skew.distribution'])
  })

  it('is strict: an unknown field is refused by name', () => {
    expect(RunConfigSchema.safeParse({ model, train, routing_skew: { alpha: 1 } }).error?.issues[0]).toMatchObject({
      code: 'unrecognized_keys', keys: ['alpha'], path: ['routing_skew'],
    })
  })

  it('says in its help text that it is an experiment, not a trained router', () => {
    expect(RunConfigSchema.shape.routing_skew.unwrap().shape.distribution.description).toMatch(/^Experiment: replace the router's choices with seeded draws \(not training a real router\)/)
  })
})

describe('engine config with a routing skew', () => {
  const engine = (c: ReturnType<typeof config>) => JSON.parse(engineConfigJson(c, null))

  it('passes the section through when a distribution is on', () => {
    expect(engine(config({ distribution: 'hot', seed: 7 })).routing_skew).toEqual({ distribution: 'hot', zipf_s: 1.2, hot_fraction: 0.95, seed: 7 })
    expect(engine(config({ distribution: 'uniform' })).routing_skew).toMatchObject({ distribution: 'uniform' })
  })

  it('leaves it out when off or omitted, so the engine’s config.json is unchanged', () => {
    expect(engine(config())).toEqual({ model: config().model, train: config().train })
    expect(engine(config({ distribution: 'none', zipf_s: 3 }))).not.toHaveProperty('routing_skew')
  })

  it('sits beside a resolved offload section', () => {
    const c = RunConfigSchema.parse({ model, train, offload: { mode: 'host', expert_slots: 2 }, routing_skew: { distribution: 'zipf' } })
    const resolved = { requested: 'host', mode: 'host', deviceBudgetBytes: 1, hostBudgetBytes: 1, slots: 2, cacheExperts: null, explanation: '' } as const
    const json = JSON.parse(engineConfigJson(c, resolved))
    expect(Object.keys(json)).toEqual(['model', 'train', 'offload', 'routing_skew'])
    expect(json.offload).toMatchObject({ mode: 'host', expert_slots: 2 })
  })
})
