// The run config's placement section (experts placed across D devices per step), the engine config
// a run's engine receives (the section only when experts run on the devices) and the run's strategy description.
import { describe, expect, it } from 'vitest'

import { RunConfigSchema, type PlacementConfig } from '../../main/api/config'
import { issuesOf } from '../../main/api/contract'
import { describeStrategy } from '../../main/host/describe-run'
import { engineConfigJson } from '../../main/host/runs/engine-config'

const model = { arch: 'mixtral', vocab_size: 64, d_model: 32, n_layers: 2, n_heads: 4, max_seq_len: 16, d_ff: 48, n_experts: 4, top_k: 2 }
const train = { batch_size: 2, seq_len: 16 }
const DEFAULTS = { devices: 1, policy: 'static', lambda: 1.3, alpha: 1.1, min_tokens: 32, greedy_split: true, device_budget_bytes: null, threads_per_device: null }

const config = (placement?: Partial<PlacementConfig>) => RunConfigSchema.parse({ model, train, ...(placement ? { placement } : {}) })

function issues(placement: object): string[] {
  const parsed = RunConfigSchema.safeParse({ model, train, placement })
  return parsed.success ? [] : issuesOf(parsed.error).map((i) => i.path)
}

describe('placement config', () => {
  it('is one device by default, and an omitted section stays omitted', () => {
    expect(config().placement).toBeUndefined()
    expect(config({}).placement).toEqual(DEFAULTS)
    expect(config({ devices: 8, policy: 'least-loaded' }).placement).toEqual({ ...DEFAULTS, devices: 8, policy: 'least-loaded' })
  })

  it('takes the engine’s ranges, inclusive at both ends', () => {
    for (const ok of [{ devices: 1 }, { devices: 1024 }, { lambda: 1 }, { lambda: 10 }, { alpha: 1 }, { alpha: 10 }, { min_tokens: 1 }, { min_tokens: 1 << 24 }])
      expect(issues({ policy: 'least-loaded', ...ok })).toEqual([])
    expect(issues({ devices: 0 })).toEqual(['placement.devices'])
    expect(issues({ devices: 1025 })).toEqual(['placement.devices'])
    expect(issues({ devices: 2.5 })).toEqual(['placement.devices'])
    expect(issues({ lambda: 0.99 })).toEqual(['placement.lambda'])
    expect(issues({ alpha: 10.01 })).toEqual(['placement.alpha'])
    expect(issues({ min_tokens: 0 })).toEqual(['placement.min_tokens'])
    expect(issues({ policy: 'round-robin' })).toEqual(['placement.policy'])
    for (const ok of [{ device_budget_bytes: 1 }, { device_budget_bytes: null }, { device_budget_bytes: 2 ** 40 }, { threads_per_device: 1 }, { threads_per_device: 256 }, { threads_per_device: null }, { greedy_split: false }])
      expect(issues(ok)).toEqual([])
    expect(issues({ device_budget_bytes: 0 })).toEqual(['placement.device_budget_bytes'])
    expect(issues({ device_budget_bytes: 1.5 })).toEqual(['placement.device_budget_bytes'])
    expect(issues({ device_budget_bytes: '1G' })).toEqual(['placement.device_budget_bytes'])
    expect(issues({ threads_per_device: 0 })).toEqual(['placement.threads_per_device'])
    expect(issues({ threads_per_device: 257 })).toEqual(['placement.threads_per_device'])
    expect(issues({ greedy_split: 'yes' })).toEqual(['placement.greedy_split'])
  })

  it('says what is wrong with the device fields', () => {
    const message = (placement: object) => issuesOf(RunConfigSchema.safeParse({ model, train, placement }).error!)[0]!.message
    expect(message({ device_budget_bytes: 0 })).toBe('must be a positive number of bytes')
    expect(message({ device_budget_bytes: 1.5 })).toBe('must be a whole number of bytes')
  })

  it('is strict: an unknown field is refused by name', () => {
    expect(RunConfigSchema.safeParse({ model, train, placement: { beta: 1 } }).error?.issues[0]).toMatchObject({
      code: 'unrecognized_keys', keys: ['beta'], path: ['placement'],
    })
  })

  it('describes every field, saying the devices are virtual', () => {
    const shape = RunConfigSchema.shape.placement.unwrap().shape
    expect(Object.values(shape).every((f) => f.description)).toBe(true)
    expect(shape.devices.description).toMatch(/virtual devices sharing this machine; .*\)\. 1: no placement$/)
  })
})

describe('engine config with a placement', () => {
  const engine = (c: ReturnType<typeof config>) => JSON.parse(engineConfigJson(c, null))

  it('passes the section through with more than one device', () => {
    expect(engine(config({ devices: 4, policy: 'least-loaded', lambda: 2 })).placement).toEqual({ ...DEFAULTS, devices: 4, policy: 'least-loaded', lambda: 2 })
    expect(engine(config({ devices: 2, device_budget_bytes: 2 ** 30, threads_per_device: 4 })).placement)
      .toEqual({ ...DEFAULTS, devices: 2, device_budget_bytes: 2 ** 30, threads_per_device: 4 })
    expect(engine(config({ devices: 2, policy: 'greedy', greedy_split: false })).placement)
      .toEqual({ ...DEFAULTS, devices: 2, policy: 'greedy', greedy_split: false })
  })

  it('leaves it out with one device or none given, so the engine’s config.json is unchanged', () => {
    expect(engine(config())).toEqual({ model: config().model, train: config().train })
    expect(engine(config({ devices: 1, policy: 'greedy' }))).not.toHaveProperty('placement')
  })

  it('sits after a routing skew', () => {
    const c = RunConfigSchema.parse({ model, train, routing_skew: { distribution: 'hot' }, placement: { devices: 2 } })
    expect(Object.keys(engine(c))).toEqual(['model', 'train', 'routing_skew', 'placement'])
  })
})

describe('strategy description with a placement', () => {
  it('names the policy and devices, and nothing for one device', () => {
    expect(describeStrategy(config({ devices: 4, policy: 'least-loaded' }))).toBe('resident · dropless · least-loaded on 4 devices · 2 threads')
    expect(describeStrategy(config({ devices: 1, policy: 'greedy' }))).toBe('resident · dropless · 2 threads')
  })
})
