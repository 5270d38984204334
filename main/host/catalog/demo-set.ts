// The demo's ablation set, ES-MoE table-3 style but sized for minutes on a 2-core machine: the tiny preset
// trained resident, with its experts offloaded to host memory (25% of the slots pinned, expert-wise host
// AdamW, uploads pipelined one ahead), offloaded to SSD behind a host cache, and placed on 4 virtual devices
// under a Zipf routing skew with static homes and with least-loaded rebalancing. Every run trains the same
// model on the same data for the same steps, so Compare's ratios to the resident run are the strategies' cost.
import { RunConfigSchema, type RunConfig } from '../../api/config'
import { effectiveModelConfig } from '../../api/model-families'

export interface DemoRun {
  /** Stable: the run name is "demo · <key>", which is how a second start finds finished runs to reuse. */
  key: string
  /** What the run shows, for the progress lines. */
  what: string
  change(config: RunConfig): RunConfig
}

// A quarter of the routed experts get device slots (tiny: 8 of 32), so the offloaded runs stream most of them
// and pin some (at least 4 slots: one pinned); the SSD tier's host cache holds half of them.
const routedExperts = (c: RunConfig) => effectiveModelConfig(c.model).n_experts.reduce((a, b) => a + b, 0)
const slotsOf = (c: RunConfig) => Math.max(4, Math.floor(routedExperts(c) / 4))
const cacheOf = (c: RunConfig) => Math.max(slotsOf(c), Math.floor(routedExperts(c) / 2))
const ZIPF = { distribution: 'zipf', zipf_s: 1.2, hot_fraction: 0.95, seed: 1 } as const
const placed = (policy: 'static' | 'least-loaded') => (c: RunConfig): RunConfig =>
  RunConfigSchema.parse({ ...c, routing_skew: ZIPF, placement: { devices: 4, policy } })

export const DEMO_SET: readonly DemoRun[] = [
  { key: 'resident', what: 'every expert resident (the baseline)', change: (c) => c },
  {
    key: 'host offload',
    what: 'experts in host memory, device slots for a quarter of them, 25% of the slots pinned, expert-wise host AdamW, uploads one ahead',
    change: (c) => RunConfigSchema.parse({ ...c, offload: { mode: 'host', expert_slots: slotsOf(c), pin_fraction: 0.25, optimizer: 'expert', lookahead: 1 } }),
  },
  {
    key: 'ssd offload',
    what: 'experts on SSD behind a host cache of half of them, the same device slots and pins, prefetch',
    change: (c) => RunConfigSchema.parse({ ...c, offload: { mode: 'ssd', expert_slots: slotsOf(c), cache_experts: cacheOf(c), pin_fraction: 0.25, prefetch: true } }),
  },
  { key: 'static placement', what: '4 devices, Zipf routing skew, expert e on device e mod 4', change: placed('static') },
  { key: 'least-loaded placement', what: '4 devices, Zipf routing skew, overloaded devices spill to the least loaded', change: placed('least-loaded') },
]

export const demoRunName = (run: DemoRun): string => `demo · ${run.key}`

/** The set's configs from the base (the tiny preset with the demo's steps), warmup shortened to fit. */
export function demoSetConfigs(base: RunConfig): { run: DemoRun; config: RunConfig }[] {
  const short: RunConfig = {
    ...base,
    train: { ...base.train, warmup_steps: Math.min(base.train.warmup_steps, Math.max(1, Math.floor(base.train.steps / 6))), checkpoint_every: 0 },
  }
  return DEMO_SET.map((run) => ({ run, config: run.change(short) }))
}
