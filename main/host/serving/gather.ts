// Gathers what the serving hints need from a run: its recorded expert loads over a step range, the model
// layer of each MoE layer (the one rule in model-families.ts) and each layer's expert bytes in the serving
// engine's storage, then computes every hint (serving/hints.ts) with a short text on how to use it.
import { formatBytes } from '../../api/bytes'
import type { ServingHints, ServingHintsParams } from '../../api/contract'
import { effectiveModelConfig, moeLayerIndexes } from '../../api/model-families'
import { countParams } from '../planner/param-count'
import { StoreError } from '../store/errors'
import type { TelemetryStore } from '../store/store'
import { hotExperts, llamaCppOverride, sglangExpertLocation, type LayerLoads, type PinPolicyName } from './hints'

// The store answers up to this many steps of one layer exactly (more would be bucketed).
export const MAX_HINT_STEPS = 2000

export function servingHints(store: TelemetryStore, params: ServingHintsParams): ServingHints {
  const run = store.getRun(params.id)
  if (!run) throw new StoreError(`no run "${params.id}"`)
  if (run.step < 1) throw new StoreError(`run ${params.id}: no step is recorded yet, so there are no expert loads to use`)
  const to = Math.min(params.toStep ?? run.step, run.step)
  const from = Math.max(1, params.fromStep ?? to - params.lastSteps + 1)
  if (from > to) throw new StoreError(`run ${params.id}: fromStep ${from} is after toStep ${to}`)
  if (to - from + 1 > MAX_HINT_STEPS)
    throw new StoreError(`run ${params.id}: steps ${from}..${to} are ${to - from + 1} steps; choose at most ${MAX_HINT_STEPS}`)

  const model = effectiveModelConfig(run.config.model)
  const layers = moeLayerIndexes(run.config.model)
  const perExpert = countParams(run.config.model).perExpert
  const loads: LayerLoads[] = layers.map((layer, i) => {
    const load = store.expertLoad(params.id, i, { fromStep: from, toStep: to, maxSteps: MAX_HINT_STEPS })
    const steps = load.steps.map((_, s) => load.counts.slice(s * load.experts, (s + 1) * load.experts))
    return { layer, steps, expertBytes: model.n_experts[i]! * perExpert[i]! * params.bytesPerParam }
  })
  const input = { nLayers: run.config.model.n_layers, layers: loads }

  // An offloaded run's own pinning, else (resident, or pinning off) the summed tokens and top_k per MoE layer.
  const offload = run.config.offload?.mode === 'none' ? undefined : run.config.offload
  const pinning = offload && offload.pin_policy !== 'none' ? offload : undefined
  const policy: PinPolicyName = params.pinPolicy ?? (pinning ? (pinning.pin_policy === 'ema' ? 'ema' : 'previous') : 'sum')
  const slots = pinning?.expert_slots ?? null
  const pinSlots = params.pinSlots ?? (pinning && slots !== null ? Math.floor(pinning.pin_fraction * slots) : loads.length * model.top_k)
  const llama = llamaCppOverride(input, params.vramBytes)
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`
  return {
    range: { fromStep: from, toStep: to },
    sglang: sglangExpertLocation(input),
    llamaCpp: llama,
    hotExperts: hotExperts(input, pinSlots, policy),
    usage: {
      sglang:
        'Save as expert-location.json and start SGLang with `--init-expert-location expert-location.json` (with expert parallelism, ' +
        '`--enable-eplb` or `--ep-num-redundant-experts N` to replicate the hottest): its rebalancer places experts from these token counts ' +
        `(steps ${from}–${to}; one row per model layer, dense layers zero).`,
      llamaCpp:
        `Add to llama-server or llama-cli: ${llama.args}. The experts of layers ${llama.gpuLayers.join(', ') || '(none fit)'} ` +
        `stay on the GPU (${formatBytes(llama.gpuBytes)} at ${params.bytesPerParam} bytes per parameter, within ` +
        `${formatBytes(params.vramBytes)}), serving ${pct(llama.trafficOnGpu)} of the routed expert traffic of steps ` +
        `${from}–${to}; every other expert tensor stays on the CPU. Use the bytes per parameter of your GGUF's quantisation.`,
      hotExperts:
        `The ${pinSlots} experts the workbench's pinning (${policy}) would keep on the device after step ${to}, per layer with the ` +
        'share of that layer\'s tokens they took: pin them in a server that supports it, or use them as offload.pin_fraction guidance.',
    },
  }
}
