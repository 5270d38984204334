// `moe-workbench runs`: every run in the database, newest first.
import { parseCommandArgs } from '../args'
import type { CliContext } from '../context'
import { formatLoss, formatRate, formatTime, table } from '../format'

export async function runs(argv: string[], ctx: CliContext): Promise<number> {
  parseCommandArgs('runs', argv, {})
  const host = await ctx.openHost({ recoverRuns: false })
  try {
    const list = await host.handlers['runs.list']({})
    if (list.length === 0) {
      ctx.out.write(`No runs in ${ctx.dataDir} yet. Start one: moe-workbench train --config tiny\n`)
      return 0
    }
    const rows = list.map((r) => [
      r.id, r.name, r.status, `${r.step}/${r.totalSteps}`, formatLoss(r.lastLoss), formatRate(r.tokensPerSec), r.model, formatTime(r.createdAt),
    ])
    ctx.out.write(`${table(['ID', 'NAME', 'STATUS', 'STEP', 'LOSS', 'TOK/S', 'MODEL', 'CREATED'], rows)}\n`)
    return 0
  } finally {
    await host.close()
  }
}
