// `moe-workbench show RUN`: one run's summary, its last step's metrics, checkpoints and events.
import type { ScalarMetric } from '../../api/contract'
import { parseCommandArgs } from '../args'
import type { CliContext } from '../context'
import { formatBytes, formatLoss, formatRate, formatTime, table } from '../format'

const METRICS: ScalarMetric[] = ['loss', 'aux_loss', 'lr', 'grad_norm', 'tokens_per_s', 'step_ms']

// A diverged step stores NaN as NULL: such a value prints as '-', never as a crash.
const formatMetric = (name: string, v: number | null | undefined): string => {
  if (v === null || v === undefined) return '-'
  if (!Number.isFinite(v)) return String(v)
  return name === 'lr' ? v.toExponential(2) : name === 'tokens_per_s' ? formatRate(v) : name.endsWith('_ms') ? `${v.toFixed(1)} ms` : v.toFixed(4)
}

export async function show(argv: string[], ctx: CliContext): Promise<number> {
  const { positionals } = parseCommandArgs('show', argv, {}, ['run'])
  const id = positionals[0]!
  const host = await ctx.openHost({ recoverRuns: false })
  try {
    const detail = await host.handlers['runs.get']({ id })
    const s = detail.summary
    const record = host.store.getRun(id)
    const lines = [
      `Run ${s.id}: ${s.name}`,
      `  status    ${s.status}${s.error ? ` (${s.error})` : ''}`,
      `  progress  step ${s.step}/${s.totalSteps}, loss ${formatLoss(s.lastLoss)}, ${formatRate(s.tokensPerSec)} tok/s`,
      `  model     ${s.model}`,
      `  strategy  ${s.strategy}`,
      `  data      ${detail.dataset.path}${detail.dataset.tokenizer ? ` (tokenizer ${detail.dataset.tokenizer})` : ' (bytes)'}`,
      ...(detail.init ? [`  init      ${detail.init}`] : []),
      `  run dir   ${record?.runDir ?? '-'}`,
      `  created   ${formatTime(s.createdAt)}   started ${formatTime(s.startedAt)}   ended ${formatTime(s.finishedAt)}`,
    ]
    const last = host.store.lastStep(id)
    if (last > 0) {
      const series = await host.handlers['metrics.series']({ id, metrics: METRICS, fromStep: last, toStep: last, maxPoints: 2 })
      const metrics = METRICS.map((m) => `${m} ${formatMetric(m, series.values[m]?.[0])}`)
      lines.push('', `Last step (${last}): ${metrics.join(', ')}`)
    }
    lines.push('', detail.checkpoints.length === 0 ? 'No checkpoints.' : 'Checkpoints:')
    if (detail.checkpoints.length > 0)
      lines.push(table(['STEP', 'SIZE', 'SAVED', 'PATH'], detail.checkpoints.map((c) => [String(c.step), formatBytes(c.bytes), formatTime(c.createdAt), c.path])))
    lines.push('', 'Events:')
    lines.push(...detail.events.map((e) => `  ${formatTime(e.at)}  ${e.kind.padEnd(10)}  ${e.message}`))
    ctx.out.write(`${lines.join('\n')}\n`)
    return 0
  } finally {
    await host.close()
  }
}
