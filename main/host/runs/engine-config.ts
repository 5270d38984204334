// The engine's config JSON for a run: the validated run config with its offload section replaced by
// the resolved one. A resident run gets no offload section at all (the engine's config.json stays as it
// always was); an offloaded one gets the mode the host settled on, the budget the planner used when the
// config leaves the engine nothing to size slots or the cache by (the engine puts the SSD tier's file in the
// run directory it is opened with).
// A routing skew goes through only when on, a pipeline only when engaged (more than one partition or a
// memory-reuse strategy), a placement only when experts run on the devices (more than one device, or
// pipelined on one), and a finetune section only when there is one (null is full training, as absent), so a run
// without them keeps the config.json it always had.
import { pipelineEngaged, runsOnDevices, type RunConfig } from '../../api/config'
import type { ResolvedOffload } from '../../api/contract'

function offloadSection(offload: RunConfig['offload'], resolved: ResolvedOffload | null): Record<string, unknown> | null {
  if (!offload || !resolved || resolved.mode === 'none') return null
  const section: Record<string, unknown> = { ...offload, mode: resolved.mode }
  if (offload.expert_slots === null && offload.device_budget_bytes === null) section['device_budget_bytes'] = resolved.deviceBudgetBytes
  if (resolved.mode === 'ssd' && offload.cache_experts === null && offload.host_budget_bytes === null)
    section['host_budget_bytes'] = resolved.hostBudgetBytes
  return section
}

export function engineConfigJson(config: RunConfig, resolved: ResolvedOffload | null): string {
  const { offload, routing_skew: skew, placement: _placement, pipeline, finetune, ...rest } = config
  const section = offloadSection(offload, resolved)
  const placement = runsOnDevices(config) ? config.placement : undefined
  return JSON.stringify({
    ...rest,
    ...(section ? { offload: section } : {}),
    ...(skew && skew.distribution !== 'none' ? { routing_skew: skew } : {}),
    ...(placement ? { placement } : {}),
    ...(pipeline && pipelineEngaged(pipeline) ? { pipeline } : {}),
    ...(finetune ? { finetune } : {}),
  })
}
