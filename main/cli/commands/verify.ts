// `moe-workbench verify RUN [--step N]`: checks a run's checkpoints (or one) against the checksums the engine
// wrote with them; exit 1 when one is corrupt, naming the file and both checksums.
import { verifyCheckpoint } from '../../host/checkpoint-verify'
import { integerOption, parseCommandArgs } from '../args'
import type { CliContext } from '../context'
import { table } from '../format'

const OPTIONS = { step: { type: 'string' } } as const

export async function verify(argv: string[], ctx: CliContext): Promise<number> {
  const { values, positionals } = parseCommandArgs('verify', argv, OPTIONS, ['run'])
  const id = positionals[0]!
  const step = integerOption('verify', 'step', values.step, 0)
  const host = await ctx.openHost({ recoverRuns: false })
  try {
    if (!host.store.getRun(id)) throw new Error(`no run "${id}"`)
    const checkpoints = host.store.listCheckpoints(id).filter((c) => step === undefined || c.step === step)
    if (checkpoints.length === 0) {
      ctx.out.write(step === undefined ? `run ${id} has no checkpoints\n` : `run ${id} has no checkpoint at step ${step}\n`)
      return step === undefined ? 0 : 1
    }
    const problems: string[] = []
    const rows = checkpoints.map((c) => {
      const check = verifyCheckpoint(c.path)
      if (check.state === 'corrupt') problems.push(`step ${c.step}: ${check.reason}`)
      const verdict = check.state === 'ok' ? `ok (${check.files} files)` : check.state === 'corrupt' ? 'CORRUPT' : 'no checksums (older checkpoint)'
      return [String(c.step), verdict, c.path]
    })
    ctx.out.write(`${table(['STEP', 'CHECK', 'PATH'], rows)}\n`)
    for (const p of problems) ctx.err.write(`${p}\n`)
    return problems.length === 0 ? 0 : 1
  } finally {
    await host.close()
  }
}
