// What the Models view shows of a model card (models.inspect), as plain rows a test can read without a DOM.
import type { ModelCard } from '../../main/api/model-card'
import type { Params } from '../../main/api/contract'
import { formatBytes } from '../format'
import { computedAs } from './computed-as'

export function formatCount(n: number): string {
  for (const [unit, size] of [['T', 1e12], ['B', 1e9], ['M', 1e6], ['K', 1e3]] as const)
    if (n >= size) return `${(n / size).toFixed(n >= 10 * size ? 1 : 2)} ${unit}`
  return String(n)
}

export interface Fact {
  label: string
  value: string
  warn?: boolean
}

export function cardFacts(c: ModelCard): Fact[] {
  const facts: Fact[] = [{ label: 'Model type', value: `${c.modelType}${c.architecture ? ` (${c.architecture})` : ''}` }]
  if (c.model) facts.push({ label: 'Computed as', value: computedAs(c.model) })
  if (c.shape) {
    facts.push(
      { label: 'Layers', value: `${c.shape.layers} (${c.shape.moeLayers} MoE, ${c.shape.layers - c.shape.moeLayers} dense)` },
      { label: 'Experts per layer', value: `${c.shape.expertsPerLayer}${c.shape.sharedExpert ? ' + a shared expert' : ''}` },
      { label: 'Top-k', value: String(c.shape.topK) },
      { label: 'Parameters', value: `${formatCount(c.shape.totalParams)} total · ${formatCount(c.shape.activeParams)} active per token` },
    )
  }
  const w = c.weights
  const dtypes = Object.entries(w.dtypes).map(([d, n]) => `${d} (${n})`).join(', ')
  facts.push({ label: 'Dtype on disk', value: dtypes || '—' })
  const present = w.shards.filter((s) => s.present).length
  facts.push({
    label: 'Weights',
    value: w.format === 'none' ? 'no safetensors found'
      : `${w.format === 'sharded' ? `${present} of ${w.shards.length} shards` : 'model.safetensors'}${w.bytes !== null ? ` · ${formatBytes(w.bytes)}` : ''}`,
    warn: !w.complete,
  })
  if (w.tensors !== null)
    facts.push({
      label: 'Tensors',
      value: `${w.tensors} stored${w.expectedTensors !== null ? `, ${w.expectedTensors} expected` : ''}${w.expertLayout ? ` · ${w.expertLayout} experts` : ''}`,
    })
  const t = c.tokenizer
  facts.push(
    { label: 'Tokenizer', value: t.tokenizerJson ? 'tokenizer.json found' : 'no tokenizer.json', warn: !t.tokenizerJson },
    { label: 'Chat template', value: t.chatTemplate ? `found in ${t.chatTemplate}` : 'none found', warn: !t.chatTemplate },
  )
  return facts
}

/** The run config "Plan memory" asks the planner about: the model as imported, the train section's defaults with
 * sequences no longer than the model's positions. */
export function planConfig(c: ModelCard): Params<'planner.plan'>['config'] | null {
  if (!c.model) return null
  return { model: c.model, train: { seq_len: Math.min(256, c.model.max_seq_len) } }
}
