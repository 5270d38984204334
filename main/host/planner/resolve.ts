// Before a run's engine starts, the host settles its offload: "auto" becomes the mode the planner
// picks for this machine, and the decision (mode, budgets, slots, cache entries, why) is kept with the
// run so its page can say "auto → host" and a restart trains the same way.
import { OFFLOAD_DEVICES_MESSAGE, OffloadConfigSchema, runsOnDevices, type RunConfig } from '../../api/config'
import { ApiInputError, type Hardware, type ResolvedOffload } from '../../api/contract'
import { planRun, type Budgets } from './plan'

/** The machine's budgets: the first GPU's memory for the device (host memory on the CPU backend), host memory, free disk. */
export function budgetsOf(hardware: Pick<Hardware, 'memoryBytes' | 'gpus' | 'disks'>): Budgets {
  return {
    device: hardware.gpus[0]?.memoryBytes ?? hardware.memoryBytes,
    host: hardware.memoryBytes,
    ssd: hardware.disks[0]?.freeBytes ?? null,
  }
}

/** The run's offload on this machine; an "auto" that fits nowhere is refused with the planner's explanation. */
export function resolveOffload(config: RunConfig, machine: Budgets): ResolvedOffload {
  const plan = planRun(config, machine)
  if (plan.requested === 'auto' && !plan.fits)
    throw new ApiInputError('runs.create', [{ path: 'spec.config.offload.mode', message: plan.explanation }])
  // An explicit mode that does not fit is left to the user (the planner can be conservative), unless no mode
  // would fit: then the run could only fail at its first allocation, so it is refused before it exists.
  if (!plan.fits && config.offload?.device_budget_bytes == null && config.offload?.host_budget_bytes == null) {
    const best = planRun({ ...config, offload: { ...(config.offload ?? OffloadConfigSchema.parse({})), mode: 'auto' } }, machine)
    if (!best.fits)
      throw new ApiInputError('runs.create', [{
        path: 'spec.config.model',
        message: `fits this machine in no offload mode (${plan.explanation}); with offload: ${best.explanation}. ` +
          'Make the model smaller (layers, d_model, experts, vocab) or the batch shorter, or train on a machine with more memory',
      }])
  }
  // The schema refuses host/ssd with devices or a pipeline; "auto" is refused here when it needs to offload.
  if (plan.mode !== 'none' && runsOnDevices(config))
    throw new ApiInputError('runs.create', [
      { path: 'spec.config.placement.devices', message: `offload auto → ${plan.mode}: ${OFFLOAD_DEVICES_MESSAGE}` },
    ])
  const budget = (tier: string) => plan.tiers.find((t) => t.tier === tier)?.budget ?? null
  return {
    requested: plan.requested,
    mode: plan.mode,
    deviceBudgetBytes: budget('device'),
    hostBudgetBytes: budget('host'),
    slots: plan.slots,
    cacheExperts: plan.cacheExperts,
    explanation: plan.explanation,
  }
}
