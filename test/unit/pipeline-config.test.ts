// The run config's pipeline section (MPipeMoE: the MoE layers' expert phase in n micro-batches with optional
// memory reuse) and the engine's rule that devices and pipelining come without offload for now: the schema's
// ranges and messages, each naming its field, the engine config (the section only when engaged, with the
// placement it runs on), the host refusing an offload "auto" that resolves to offloading, and the strategy text.
import { describe, expect, it } from 'vitest'

import { RunConfigSchema, pipelineEngaged, runsOnDevices, type RunConfig } from '../../main/api/config'
import { ApiInputError, issuesOf } from '../../main/api/contract'
import { describeStrategy } from '../../main/host/describe-run'
import { resolveOffload } from '../../main/host/planner/resolve'
import { engineConfigJson } from '../../main/host/runs/engine-config'

const model = { arch: 'mixtral', vocab_size: 64, d_model: 32, n_layers: 2, n_heads: 4, max_seq_len: 16, d_ff: 48, n_experts: 4, top_k: 2 }
const train = { batch_size: 2, seq_len: 16 }
const DEFAULTS = { partitions: 1, candidates: [1, 2, 4, 8], memory_reuse: 'off' }

const parse = (extra: object) => RunConfigSchema.safeParse({ model, train, ...extra })
const config = (extra: object): RunConfig => RunConfigSchema.parse({ model, train, ...extra })
const issues = (extra: object) => {
  const parsed = parse(extra)
  return parsed.success ? [] : issuesOf(parsed.error)
}
const paths = (pipeline: object) => issues({ pipeline }).map((i) => i.path)

describe('pipeline config', () => {
  it('defaults to one partition without memory reuse, and an omitted section stays omitted', () => {
    expect(config({}).pipeline).toBeUndefined()
    expect(config({ pipeline: {} }).pipeline).toEqual(DEFAULTS)
    expect(config({ pipeline: { partitions: 'auto', candidates: [2, 16], memory_reuse: 'S3' } }).pipeline).toEqual({ partitions: 'auto', candidates: [2, 16], memory_reuse: 'S3' })
  })

  it('takes the engine’s ranges: partitions 1 … 64 or "auto", candidates 1 … 64 and at least one, the reuse strategies', () => {
    for (const ok of [{ partitions: 1 }, { partitions: 64 }, { partitions: 'auto' }, { candidates: [1] }, { candidates: [64, 1, 3] },
      ...['off', 'auto', 'S1', 'S2', 'S3', 'S4'].map((memory_reuse) => ({ memory_reuse }))])
      expect(paths(ok)).toEqual([])
    for (const partitions of [0, 65, 2.5, 'many', null]) expect(paths({ partitions })).toEqual(['pipeline.partitions'])
    expect(paths({ candidates: [] })).toEqual(['pipeline.candidates'])
    expect(paths({ candidates: [2, 0] })).toEqual(['pipeline.candidates.1'])
    expect(paths({ candidates: [65] })).toEqual(['pipeline.candidates.0'])
    expect(paths({ candidates: 4 })).toEqual(['pipeline.candidates'])
    expect(paths({ memory_reuse: 'S5' })).toEqual(['pipeline.memory_reuse'])
    expect(paths({ memory_reuse: 's1' })).toEqual(['pipeline.memory_reuse'])
  })

  it('says what each bad value should be', () => {
    const message = (pipeline: object) => issues({ pipeline })[0]!.message
    expect(message({ partitions: 65 })).toBe('must be a whole number in [1, 64] or "auto"')
    expect(message({ partitions: 'many' })).toBe('must be a whole number in [1, 64] or "auto"')
    expect(message({ candidates: [] })).toBe('must list at least one partition count')
    expect(message({ candidates: 4 })).toBe('must list partition counts, each a whole number in [1, 64]')
    expect(message({ memory_reuse: 'S5' })).toMatch(/"off"|off/)
  })

  it('is strict: an unknown field is refused by name', () => {
    expect(parse({ pipeline: { micro_batches: 4 } }).error?.issues[0]).toMatchObject({ code: 'unrecognized_keys', keys: ['micro_batches'], path: ['pipeline'] })
  })

  it('describes every field', () => {
    const shape = RunConfigSchema.shape.pipeline.unwrap().shape
    expect(Object.values(shape).every((f) => f.description)).toBe(true)
  })

  it('is engaged, as the engine’s engaged(), with more than one partition, auto, or a memory-reuse strategy', () => {
    expect(pipelineEngaged(undefined)).toBe(false)
    expect(pipelineEngaged(config({ pipeline: {} }).pipeline)).toBe(false)
    expect(pipelineEngaged(config({ pipeline: { candidates: [4] } }).pipeline)).toBe(false)
    expect(pipelineEngaged(config({ pipeline: { partitions: 2 } }).pipeline)).toBe(true)
    expect(pipelineEngaged(config({ pipeline: { partitions: 'auto' } }).pipeline)).toBe(true)
    expect(pipelineEngaged(config({ pipeline: { memory_reuse: 'auto' } }).pipeline)).toBe(true)
    expect(runsOnDevices(config({ placement: { devices: 2 } }))).toBe(true)
    expect(runsOnDevices(config({ placement: { devices: 1 }, pipeline: { partitions: 4 } }))).toBe(true)
    expect(runsOnDevices(config({ placement: { devices: 1 }, pipeline: {} }))).toBe(false)
  })
})

describe('devices and pipelining without offload', () => {
  const offload = (mode: string) => ({ mode, expert_slots: 2, cache_experts: 4 })

  it('refuses host or SSD offload with more than one device or an engaged pipeline, naming placement.devices', () => {
    for (const mode of ['host', 'ssd']) {
      for (const extra of [{ placement: { devices: 2 } }, { pipeline: { partitions: 4 } }, { placement: { devices: 1 }, pipeline: { memory_reuse: 'S1' } }]) {
        const found = issues({ offload: offload(mode), ...extra })
        expect(found.map((i) => i.path)).toEqual(['placement.devices'])
        expect(found[0]!.message).toMatch(new RegExp(`^${mode} offload: experts run on several devices or pipelined only without offload for now; set offload.mode to "none", or placement.devices to 1`))
      }
      expect(issues({ offload: offload(mode), placement: { devices: 1 }, pipeline: {} })).toEqual([])
    }
    expect(issues({ offload: offload('none'), placement: { devices: 4 }, pipeline: { partitions: 'auto' } })).toEqual([])
    // auto may resolve to resident: the host decides (below).
    expect(issues({ offload: offload('auto'), placement: { devices: 4 } })).toEqual([])
  })

  it('refuses an offload "auto" that resolves to offloading for a run on devices, naming placement.devices', () => {
    const small = { device: 800 * 1024, host: 2 ** 40, ssd: null } // resident needs about 1.07 MiB, host mode about 588 KiB
    const big = { device: 2 ** 40, host: 2 ** 40, ssd: null }
    const placed = config({ offload: { mode: 'auto' }, placement: { devices: 2 } })
    expect(resolveOffload(placed, big).mode).toBe('none')
    let error: unknown
    try {
      resolveOffload(placed, small)
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(ApiInputError)
    expect((error as ApiInputError).issues).toEqual([
      { path: 'spec.config.placement.devices', message: expect.stringMatching(/^offload auto → host: experts run on several devices or pipelined only without offload/) },
    ])
    expect(resolveOffload(config({ offload: { mode: 'auto' } }), small).mode).toBe('host')
  })
})

describe('engine config with a pipeline', () => {
  const engine = (c: RunConfig) => JSON.parse(engineConfigJson(c, null))

  it('passes an engaged pipeline through, after the placement', () => {
    const c = config({ placement: { devices: 2 }, pipeline: { partitions: 'auto', candidates: [2, 4], memory_reuse: 'auto' } })
    expect(engine(c).pipeline).toEqual({ partitions: 'auto', candidates: [2, 4], memory_reuse: 'auto' })
    expect(Object.keys(engine(c))).toEqual(['model', 'train', 'placement', 'pipeline'])
  })

  it('gives one pipelined device its placement section (the device budget and threads)', () => {
    const c = config({ placement: { devices: 1, device_budget_bytes: 2 ** 28, threads_per_device: 2 }, pipeline: { partitions: 4, memory_reuse: 'S2' } })
    expect(engine(c)).toMatchObject({
      placement: { devices: 1, device_budget_bytes: 2 ** 28, threads_per_device: 2 },
      pipeline: { partitions: 4, candidates: [1, 2, 4, 8], memory_reuse: 'S2' },
    })
    expect(engine(config({ pipeline: { partitions: 4 } }))).not.toHaveProperty('placement')
  })

  it('leaves out a pipeline that is not engaged, so the engine’s config.json is unchanged', () => {
    const c = config({ placement: { devices: 1, threads_per_device: 8 }, pipeline: { partitions: 1, memory_reuse: 'off', candidates: [4] } })
    expect(engine(c)).toEqual({ model: c.model, train: c.train })
  })
})

describe('strategy description with a pipeline', () => {
  it('names the partitions and the memory reuse when engaged', () => {
    expect(describeStrategy(config({ placement: { devices: 4, policy: 'greedy' }, pipeline: { partitions: 4, memory_reuse: 'S2' } })))
      .toBe('resident · dropless · greedy on 4 devices · pipelined n=4 reuse S2 · 2 threads')
    expect(describeStrategy(config({ pipeline: { partitions: 'auto' } }))).toBe('resident · dropless · pipelined n=auto · 2 threads')
    expect(describeStrategy(config({ pipeline: {} }))).toBe('resident · dropless · 2 threads')
  })
})
