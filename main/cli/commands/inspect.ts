// `moe-workbench inspect DIR [--json]`: a Hugging Face model folder's card, read from config.json and the
// safetensors headers (no weights loaded); exit 1 when the engine cannot import it as it is, naming why.
import type { ModelCard } from '../../api/model-card'
import { inspectModel } from '../../host/models/inspect'
import { parseCommandArgs } from '../args'
import type { CliContext } from '../context'
import { formatBytes } from '../format'

const OPTIONS = { json: { type: 'boolean' } } as const

export function formatCount(n: number): string {
  for (const [unit, size] of [['T', 1e12], ['B', 1e9], ['M', 1e6], ['K', 1e3]] as const)
    if (n >= size) return `${(n / size).toFixed(n >= 10 * size ? 1 : 2)}${unit}`
  return String(n)
}

export function cardText(c: ModelCard): string {
  const found = (yes: boolean) => (yes ? 'found' : 'missing')
  const lines = [`${c.label ?? c.modelType} (${c.modelType}${c.architecture ? `, ${c.architecture}` : ''})  ${c.dir}`]
  if (c.shape)
    lines.push(
      `  layers           ${c.shape.layers} (${c.shape.moeLayers} MoE)`,
      `  experts          ${c.shape.expertsPerLayer} per MoE layer, top-${c.shape.topK}${c.shape.sharedExpert ? ', shared expert' : ''}`,
      `  parameters       ${formatCount(c.shape.totalParams)} total, ${formatCount(c.shape.activeParams)} active per token`,
    )
  const dtypes = Object.entries(c.weights.dtypes).map(([d, n]) => `${d} ×${n}`).join(', ')
  const shards = c.weights.format === 'sharded'
    ? `${c.weights.shards.filter((s) => s.present).length} of ${c.weights.shards.length} shards`
    : c.weights.format === 'single' ? 'model.safetensors' : 'none'
  lines.push(
    `  weights          ${shards}${c.weights.bytes !== null ? `, ${formatBytes(c.weights.bytes)}` : ''}${dtypes ? ` (${dtypes})` : ''}`,
    `  tensors          ${c.weights.tensors ?? '-'} stored, ${c.weights.expectedTensors ?? '-'} expected${c.weights.expertLayout ? `, ${c.weights.expertLayout} experts` : ''}`,
    `  tokenizer        tokenizer.json ${found(c.tokenizer.tokenizerJson)}, tokenizer_config.json ${found(c.tokenizer.tokenizerConfig)}`,
    `  chat template    ${c.tokenizer.chatTemplate ?? 'none'}`,
    `  engine           ${c.supported ? 'imports it as it is' : 'cannot import it as it is'}`,
  )
  for (const n of c.notes) lines.push(`  note: ${n}`)
  for (const p of c.problems) lines.push(`  problem: ${p}`)
  return `${lines.join('\n')}\n`
}

export async function inspect(argv: string[], ctx: CliContext): Promise<number> {
  const { values, positionals } = parseCommandArgs('inspect', argv, OPTIONS, ['dir'])
  const card = inspectModel(positionals[0]!)
  ctx.out.write(values.json ? `${JSON.stringify(card, null, 2)}\n` : cardText(card))
  return card.supported ? 0 : 1
}
