// The demo's ablation set: five runs of the same model, data and steps that differ only in the strategy
// they show, each a valid config the planner can place.
import { describe, expect, it } from 'vitest'

import { RunConfigSchema } from '../../main/api/config'
import { findPreset } from '../../main/host/catalog'
import { DEMO_SET, demoRunName, demoSetConfigs } from '../../main/host/catalog/demo-set'
import { planRun } from '../../main/host/planner/plan'

// This machine's kind: 24 GiB of memory, a disk with room.
const MACHINE = { device: 24 * 2 ** 30, host: 24 * 2 ** 30, ssd: 50 * 2 ** 30 }

describe('demo set', () => {
  const tiny = findPreset('tiny')!.config
  const base = RunConfigSchema.parse({ ...tiny, train: { ...tiny.train, steps: 60 } })
  const set = demoSetConfigs(base)

  it('trains one model on the same steps and differs only in offload, placement and routing skew', () => {
    expect(set.map(({ run }) => demoRunName(run))).toEqual([
      'demo · resident', 'demo · host offload', 'demo · ssd offload', 'demo · static placement', 'demo · least-loaded placement',
    ])
    for (const { config } of set) {
      expect(config.model).toEqual(base.model)
      expect(config.train).toEqual({ ...base.train, warmup_steps: 10, checkpoint_every: 0 })
      expect(RunConfigSchema.safeParse(config).success).toBe(true)
    }
    const [resident, host, ssd, staticPlaced, leastLoaded] = set.map((s) => s.config)
    expect(resident!.offload?.mode ?? 'none').toBe('none')
    expect(host!.offload).toMatchObject({ mode: 'host', expert_slots: 8, pin_fraction: 0.25, optimizer: 'expert' })
    expect(ssd!.offload).toMatchObject({ mode: 'ssd', cache_experts: 16 })
    expect(staticPlaced!.placement).toMatchObject({ devices: 4, policy: 'static' })
    expect(leastLoaded!.placement).toMatchObject({ devices: 4, policy: 'least-loaded' })
    expect(staticPlaced!.routing_skew).toEqual(leastLoaded!.routing_skew)
    expect(staticPlaced!.routing_skew?.distribution).toBe('zipf')
  })

  it('fits the planner in the mode each run asks for', () => {
    for (const { run, config } of set) {
      const plan = planRun(config, MACHINE)
      expect(plan.fits, `${run.key}: ${plan.explanation}`).toBe(true)
      expect(plan.mode).toBe(config.offload?.mode ?? 'none')
    }
    expect(DEMO_SET).toHaveLength(5)
  })
})
