// `moe-workbench resume RUN`: continues a stopped or failed run from its latest checkpoint.
import { parseCommandArgs } from '../args'
import type { CliContext } from '../context'
import { RunFollower } from '../follow-run'
import { reportEnd } from './train'

export async function resume(argv: string[], ctx: CliContext): Promise<number> {
  const { positionals } = parseCommandArgs('resume', argv, {}, ['run'])
  const id = positionals[0]!
  const host = await ctx.openHost({ recoverRuns: false })
  try {
    const follower = new RunFollower(host, ctx)
    const restarted = host.runs.restart(id)
    ctx.out.write(`run ${id} continues from step ${host.store.getRun(id)?.step ?? 0}\n`)
    return reportEnd(ctx, host, await follower.follow(restarted))
  } finally {
    await host.close()
  }
}
