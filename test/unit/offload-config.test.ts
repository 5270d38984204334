// The run config's offload section (validated once, in TS), how the host settles "auto" for a run,
// and the engine config a run's engine receives: no offload section when resident, the resolved mode,
// the planner's budget when the config gives the engine nothing to size by, and an SSD directory in the run.
import { describe, expect, it } from 'vitest'

import { RunConfigSchema, type OffloadConfig } from '../../main/api/config'
import { ApiInputError, issuesOf, type ResolvedOffload } from '../../main/api/contract'
import { describeStrategy } from '../../main/host/describe-run'
import { budgetsOf, resolveOffload } from '../../main/host/planner/resolve'
import { engineConfigJson } from '../../main/host/runs/engine-config'

const model = { arch: 'mixtral', vocab_size: 64, d_model: 32, n_layers: 2, n_heads: 4, max_seq_len: 16, d_ff: 48, n_experts: 4, top_k: 2 }
const train = { batch_size: 2, seq_len: 16 }

function issues(offload: Partial<OffloadConfig>, trainOverrides: object = {}): string[] {
  const parsed = RunConfigSchema.safeParse({ model, train: { ...train, ...trainOverrides }, offload })
  return parsed.success ? [] : issuesOf(parsed.error).map((i) => `${i.path}: ${i.message}`)
}

const config = (offload?: Partial<OffloadConfig>) => RunConfigSchema.parse({ model, train, ...(offload ? { offload } : {}) })

describe('offload config', () => {
  it('defaults to resident, and an omitted section stays omitted', () => {
    expect(config().offload).toBeUndefined()
    expect(config({}).offload).toEqual({
      mode: 'none', device_budget_bytes: null, expert_slots: null, lookahead: 1, pin_fraction: 0.25, pin_policy: 'previous',
      optimizer: 'expert', optimizer_overlap: true, copy_stream: 'auto', host_budget_bytes: null, cache_policy: 'lru', cache_experts: null,
      lfu_threshold: 2, lfu_decay: 0.5, lfu_decay_every: 64, prefetch: true,
    })
  })

  it('refuses what the engine would refuse, naming the field', () => {
    expect(issues({ mode: 'host' })).toEqual(['offload.expert_slots: host offload needs expert_slots or device_budget_bytes'])
    expect(issues({ mode: 'ssd', expert_slots: 2 })).toEqual(['offload.cache_experts: SSD offload needs cache_experts or host_budget_bytes'])
    expect(issues({ mode: 'host', expert_slots: 2 }, { compute_dtype: 'bf16' })).toEqual([])
    expect(issues({ mode: 'ssd', expert_slots: 2, cache_experts: 4, optimizer: 'delayed' })).toEqual(['offload.optimizer: delayed updates are host-tier only'])
    expect(issues({ mode: 'auto', optimizer: 'delayed' })).toEqual([])
    expect(issues({ mode: 'none' }, { compute_dtype: 'bf16' })).toEqual([])
    expect(issues({ lookahead: 65 })).toHaveLength(1)
    expect(issues({ lfu_decay: 0 })).toHaveLength(1)
    expect(issues({ ssd_dir: '/tmp' } as Partial<OffloadConfig>)).toHaveLength(1)
  })
})

describe('resolving offload for a run', () => {
  const machine = { device: 700_000, host: 10 ** 6, ssd: null }

  it('records auto’s choice and the budgets it used', () => {
    const resolved = resolveOffload(config({ mode: 'auto' }), machine)
    expect(resolved).toMatchObject({ requested: 'auto', mode: 'host', deviceBudgetBytes: 700_000, hostBudgetBytes: 10 ** 6, slots: 4, cacheExperts: null })
    expect(resolved.explanation).toMatch(/^auto → host/)
    expect(resolveOffload(config(), machine)).toMatchObject({ requested: 'none', mode: 'none' })
  })

  it('refuses an auto that fits nowhere, on the mode field, with the planner’s explanation', () => {
    const refuse = () => resolveOffload(config({ mode: 'auto' }), { ...machine, device: 550_000 })
    expect(refuse).toThrow(ApiInputError)
    expect(refuse).toThrow(/spec\.config\.offload\.mode: auto: nothing fits: .*the device tier is short by 15,120 bytes/)
  })

  it('refuses a config that no offload mode fits on this machine, before the run exists, naming what to change', () => {
    const huge = RunConfigSchema.parse({ model: { ...model, d_model: 4096, n_heads: 32, d_ff: 16384, n_experts: 64, n_layers: 32, vocab_size: 32000 }, train })
    const refuse = () => resolveOffload(huge, { device: 2 ** 34, host: 2 ** 34, ssd: 2 ** 36 })
    expect(refuse).toThrow(ApiInputError)
    expect(refuse).toThrow(/spec\.config\.model: fits this machine in no offload mode \(none: does not fit: .*\); with offload: auto: nothing fits: .* Make the model smaller/)
    // What fits with offload is left to offload; a resident run the planner thinks too big but offload could run is not refused.
    expect(resolveOffload(config(), machine)).toMatchObject({ mode: 'none' })
  })

  it('takes the device from the first GPU, else host memory, and the SSD from the data disk', () => {
    const disks = [{ path: '/d', totalBytes: 9, freeBytes: 5 }]
    expect(budgetsOf({ memoryBytes: 8, gpus: [], disks })).toEqual({ device: 8, host: 8, ssd: 5 })
    expect(budgetsOf({ memoryBytes: 8, gpus: [{ name: 'g', memoryBytes: 3 }], disks: [] })).toEqual({ device: 3, host: 8, ssd: null })
  })
})

describe('engine config', () => {
  const resolved = (mode: ResolvedOffload['mode'], extra: Partial<ResolvedOffload> = {}): ResolvedOffload => ({
    requested: 'auto', mode, deviceBudgetBytes: 700_000, hostBudgetBytes: 500_000, slots: 4, cacheExperts: 6, explanation: '', ...extra,
  })
  const engine = (c: ReturnType<typeof config>, r: ResolvedOffload | null) => JSON.parse(engineConfigJson(c, r))

  it('has no offload section for a resident run', () => {
    expect(engine(config(), null)).toEqual({ model: config().model, train: config().train })
    expect(engine(config({ mode: 'auto' }), resolved('none'))).not.toHaveProperty('offload')
  })

  it('gives the engine the resolved mode, and the planner’s budget when nothing else sizes the slots', () => {
    const host = engine(config({ mode: 'auto', pin_fraction: 0.5 }), resolved('host')).offload
    expect(host).toMatchObject({ mode: 'host', device_budget_bytes: 700_000, expert_slots: null, host_budget_bytes: null, pin_fraction: 0.5 })
    expect(host).not.toHaveProperty('ssd_dir')
    const slots = engine(config({ mode: 'host', expert_slots: 2 }), resolved('host', { requested: 'host' })).offload
    expect(slots).toMatchObject({ mode: 'host', expert_slots: 2, device_budget_bytes: null })
  })

  it('gives an SSD run its budgets and leaves the expert file’s place to the engine (its run directory)', () => {
    const ssd = engine(config({ mode: 'auto' }), resolved('ssd')).offload
    expect(ssd).toMatchObject({ mode: 'ssd', device_budget_bytes: 700_000, host_budget_bytes: 500_000 })
    expect(ssd).not.toHaveProperty('ssd_dir')
    const cache = engine(config({ mode: 'ssd', expert_slots: 2, cache_experts: 4 }), resolved('ssd', { requested: 'ssd' })).offload
    expect(cache).toMatchObject({ cache_experts: 4, host_budget_bytes: null, device_budget_bytes: null })
  })
})

describe('run strategy text', () => {
  it('says where expert state lives as the host resolved it', () => {
    const host = resolveOffload(config({ mode: 'auto' }), { device: 700_000, host: 10 ** 6, ssd: null })
    expect(describeStrategy(config({ mode: 'auto' }), host)).toBe('host offload · 4 slots · dropless · 2 threads')
    expect(describeStrategy(config({ mode: 'host', expert_slots: 2, optimizer: 'delayed' }), { ...host, slots: 2 }))
      .toBe('host offload · 2 slots · one-step stale · dropless · 2 threads')
    expect(describeStrategy(config(), null)).toBe('resident · dropless · 2 threads')
  })
})
