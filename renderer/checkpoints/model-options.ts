// What a checkpoint's model is, in words, for the Checkpoints view: its family and every feature the engine
// derives from its config (model-families.ts' modelFeatures, the engine's features mirrored), listed generically
// so a feature added to a family shows here without code of its own; then the config's routing and layer
// choices, and the run's load balancing.
import type { RunConfig } from '../../main/api/config'
import { modelFeatures, moeLayerIndexes } from '../../main/api/model-families'

export interface ModelOption {
  key: string
  /** What to show: the feature's value, or null for a feature that is simply on. */
  value: string | null
}

// Features whose value is the same for every model or is shown elsewhere.
const SKIP = new Set(['moe_every'])

const words = (key: string) => key.replace(/_/g, ' ')

export function modelOptions(config: RunConfig): ModelOption[] {
  const m = config.model
  const out: ModelOption[] = [{ key: 'arch', value: m.arch }]
  for (const [key, value] of Object.entries(modelFeatures(m))) {
    if (SKIP.has(key) || value === false || value === 0 || value === null || value === undefined || value === 'none') continue
    out.push({ key: words(key), value: value === true ? null : String(value) })
  }
  const moe = moeLayerIndexes(m)
  out.push({ key: 'MoE layers', value: `${moe.length} of ${m.n_layers}` })
  if (m.dense_layers?.length) out.push({ key: 'dense layers', value: m.dense_layers.join(', ') })
  if (m.head_dim != null) out.push({ key: 'head dim', value: String(m.head_dim) })
  out.push({ key: 'top k', value: `${m.top_k} of ${Array.isArray(m.n_experts) ? m.n_experts.join('/') : m.n_experts}` })
  if ((m.routed_scaling_factor ?? 1) !== 1) out.push({ key: 'routed scaling factor', value: String(m.routed_scaling_factor) })
  if (m.selection_bias) out.push({ key: 'selection bias', value: null })
  const rate = config.train.balance_bias_rate ?? 0
  if (rate > 0) out.push({ key: 'aux-loss-free balancing', value: `rate ${rate}` })
  return out
}

export const optionText = (o: ModelOption) => (o.value === null ? o.key : `${o.key}: ${o.value}`)
