// The engine's config JSON for a run: the validated run config with its offload section replaced by
// the resolved one. A resident run gets no offload section at all (the engine's config.json stays as it
// always was); an offloaded one gets the mode the host settled on, the budget the planner used when the
// config leaves the engine nothing to size slots or the cache by, and, for SSD, a directory in the run.
import { join } from 'node:path'

import type { RunConfig } from '../../api/config'
import type { ResolvedOffload } from '../../api/contract'

export function engineConfigJson(config: RunConfig, resolved: ResolvedOffload | null, runDir: string): string {
  const { offload, ...rest } = config
  if (!offload || !resolved || resolved.mode === 'none') return JSON.stringify(rest)
  const section: Record<string, unknown> = { ...offload, mode: resolved.mode }
  if (offload.expert_slots === null && offload.device_budget_bytes === null) section['device_budget_bytes'] = resolved.deviceBudgetBytes
  if (resolved.mode === 'ssd') {
    if (offload.cache_experts === null && offload.host_budget_bytes === null) section['host_budget_bytes'] = resolved.hostBudgetBytes
    section['ssd_dir'] = join(runDir, 'ssd')
  }
  return JSON.stringify({ ...rest, offload: section })
}
