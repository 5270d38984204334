// The planner against the engine: a small model trained through the real addon in host mode, its
// device tier sized by a budget, peaks within 10% of what the planner booked for each tier (the engine
// charges the dense state, the activations and scratch, and the slots to the device tier; every
// expert's state to the host tier). The engine config is the one the host hands a run's engine.
import { join } from 'node:path'

import { afterAll, describe, expect, it } from 'vitest'

import { RunConfigSchema } from '../../main/api/config'
import { loadEngineAddon } from '../../main/host/engine/addon'
import { decodeStepRecord, type EngineStepRecord } from '../../main/host/engine/step-record'
import { planRun } from '../../main/host/planner/plan'
import { resolveOffload } from '../../main/host/planner/resolve'
import { deviceFixed, sizesOf } from '../../main/host/planner/tiers'
import { engineConfigJson } from '../../main/host/runs/engine-config'
import { tinyConfig, writeCorpusShard } from '../integration/helpers/engine-fixtures'
import { tempDir } from './store-fixtures'

const { dir, cleanup } = tempDir()
afterAll(cleanup)
const shard = writeCorpusShard(join(dir, 'corpus.bin'))
const MACHINE = { device: 2 ** 40, host: 2 ** 40, ssd: null }

async function train(configJson: string, runDir: string): Promise<EngineStepRecord[]> {
  const engine = new (loadEngineAddon().Engine)(configJson, undefined, runDir)
  engine.setData(shard)
  const records: EngineStepRecord[] = []
  await new Promise<void>((resolve, reject) =>
    engine.start({}, (buf) => records.push(decodeStepRecord(buf)), () => {}, (status, error) =>
      status === 'failed' ? reject(new Error(error)) : resolve()),
  )
  return records
}

const within10 = (measured: number, planned: number) => Math.abs(measured - planned) / planned

describe('planner peaks against the engine’s', () => {
  it('books what a host-offloaded run measures, per tier, within 10%', async () => {
    const base = tinyConfig({ steps: 3, grad_clip: 1 })
    const s = sizesOf(base)
    // Room for the dense state, activations and buffers, 3 slots and half of a fourth.
    const budget = deviceFixed(s) + 3 * 2 * s.expert + s.expert
    const config = RunConfigSchema.parse({ ...base, offload: { mode: 'host', device_budget_bytes: budget } })
    const plan = planRun(config, MACHINE)
    expect(plan).toMatchObject({ mode: 'host', fits: true, slots: 3 })
    const planned = Object.fromEntries(plan.tiers.map((t) => [t.tier, t.total]))
    const records = await train(engineConfigJson(config, resolveOffload(config, MACHINE)), join(dir, 'host'))
    expect(records).toHaveLength(3)
    const measured = peaks(records)
    expect(within10(measured.host, planned['host']!)).toBeLessThan(0.1)
    expect(within10(measured.device, planned['device']!)).toBeLessThan(0.1)
  })

  it('books a bf16 run’s copies as the engine does: the dense ones, and one per slot', async () => {
    const base = tinyConfig({ steps: 3, grad_clip: 1, compute_dtype: 'bf16' })
    const s = sizesOf(base)
    // The tiny preset's experts have no biases: a slot keeps no fp32 weights, only their bf16 copy.
    expect(s).toMatchObject({ slotWeights: 0, expertBf16: s.expert / 2 })
    expect(s.bf16Dense).toBeGreaterThan(0)
    // Room for the fixed part and 3 slots of gradient and bf16 copy, and a little more.
    const budget = deviceFixed(s) + 3 * (s.expert + s.expertBf16) + s.expert / 4
    const config = RunConfigSchema.parse({ ...base, offload: { mode: 'host', device_budget_bytes: budget } })
    const plan = planRun(config, MACHINE)
    expect(plan).toMatchObject({ mode: 'host', fits: true, slots: 3 })
    const planned = Object.fromEntries(plan.tiers.map((t) => [t.tier, t.total]))
    const records = await train(engineConfigJson(config, resolveOffload(config, MACHINE)), join(dir, 'host-bf16'))
    expect(records).toHaveLength(3)
    expect(records.every((r) => Number.isFinite(r.loss))).toBe(true)
    const measured = peaks(records)
    expect(within10(measured.host, planned['host']!)).toBeLessThan(0.1)
    expect(within10(measured.device, planned['device']!)).toBeLessThan(0.1)
  })

  it('books what an SSD-offloaded run measures, per tier, within 10%', async () => {
    const config = RunConfigSchema.parse({ ...tinyConfig({ steps: 3 }), offload: { mode: 'ssd', expert_slots: 2, cache_experts: 5 } })
    const plan = planRun(config, MACHINE)
    expect(plan).toMatchObject({ mode: 'ssd', fits: true, slots: 2, cacheExperts: 5 })
    const runDir = join(dir, 'ssd')
    const measured = peaks(await train(engineConfigJson(config, resolveOffload(config, MACHINE)), runDir))
    for (const t of plan.tiers) expect(within10(measured[t.tier], t.total), t.tier).toBeLessThan(0.1)
  })
})

function peaks(records: EngineStepRecord[]): Record<'device' | 'host' | 'ssd', number> {
  const peak = (key: 'peak_device_bytes' | 'peak_host_bytes' | 'peak_ssd_bytes') => Math.max(...records.map((r) => r[key] ?? NaN))
  return { device: peak('peak_device_bytes'), host: peak('peak_host_bytes'), ssd: peak('peak_ssd_bytes') }
}
