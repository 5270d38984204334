// An offloaded run's settings as the Run view lists them: what the host resolved (auto → host, slots,
// budgets, cache entries) and the knobs that shape its telemetry. Delayed updates are labelled as the
// one-step-stale ablation they are, so their losses are never read as exact.
import type { RunConfig } from '../../../main/api/config'
import type { ResolvedOffload } from '../../../main/api/contract'
import { formatBytes } from '../../forms/bytes'

export interface SettingRow {
  label: string
  value: string
}

const COPY_STREAMS = {
  auto: 'auto (mapped for the SSD tier on the cpu backend, inline for the host tier when compute takes every core, else a copy worker)',
  worker: 'a copy worker overlapping compute',
  inline: 'inline on the compute thread',
  mapped: 'mapped (the experts compute on their host copies in place; cpu backend)',
}
const OPTIMIZERS = { expert: 'expert-wise host AdamW', layer: 'layer-wise host AdamW', delayed: 'delayed (one-step stale: ZeRO-Offload-style ablation, not exact)' }

// The budget the engine trains under: the config's, else the planner's when nothing else sizes the tier
// (runs/engine-config.ts), else none, the count being fixed.
function engineBudget(configured: number | null, count: number | null, planned: number | null, countName: string): string {
  if (configured !== null) return formatBytes(configured)
  return count === null ? `${formatBytes(planned)} (the machine’s)` : `none (${countName} fixed)`
}

export function offloadSettings(config: RunConfig, resolved: ResolvedOffload): SettingRow[] {
  const o = config.offload
  if (!o || resolved.mode === 'none') return [{ label: 'mode', value: resolved.requested === 'auto' ? 'auto → none (resident)' : 'resident' }]
  const rows: SettingRow[] = [
    { label: 'mode', value: resolved.requested === 'auto' ? `auto → ${resolved.mode}` : resolved.mode },
    { label: 'expert slots', value: resolved.slots === null ? 'from the device budget' : String(resolved.slots) },
    { label: 'device budget', value: engineBudget(o.device_budget_bytes, o.expert_slots, resolved.deviceBudgetBytes, 'expert_slots') },
    { label: 'lookahead', value: o.lookahead === 0 ? '0 (no pipelining: upload when needed)' : String(o.lookahead) },
    { label: 'pinning', value: o.pin_policy === 'none' || o.pin_fraction === 0 ? 'off' : `${o.pin_fraction} of the slots, by ${o.pin_policy}` },
    { label: 'optimizer', value: `${OPTIMIZERS[o.optimizer]}${o.optimizer_overlap ? '' : ', after the step (no overlap)'}` },
    { label: 'copy stream', value: COPY_STREAMS[o.copy_stream] },
  ]
  if (resolved.mode === 'ssd') {
    const lfu = o.cache_policy === 'lfu' ? ` (threshold ${o.lfu_threshold}, decay ${o.lfu_decay} every ${o.lfu_decay_every})` : ''
    rows.push(
      { label: 'host budget', value: engineBudget(o.host_budget_bytes, o.cache_experts, resolved.hostBudgetBytes, 'cache_experts') },
      { label: 'host cache', value: `${resolved.cacheExperts ?? '?'} experts, ${o.cache_policy}${lfu}` },
      { label: 'prefetch', value: o.prefetch ? 'next layer’s experts' : 'off' },
    )
  }
  return rows
}
