// `moe-workbench demo`: serves the UI, trains the tiny preset on the bundled corpus (watch it live
// at the printed URL), then keeps serving until Ctrl-C.
import { bundledCorpus } from '../../host/catalog'
import { integerOption, parseCommandArgs } from '../args'
import { serveUi, untilInterrupted } from '../browser-ui'
import type { CliContext } from '../context'
import { loadRunConfig } from '../run-config'
import { portOption } from './serve'
import { followNewRun } from './train'

export async function demo(argv: string[], ctx: CliContext): Promise<number> {
  const { values } = parseCommandArgs('demo', argv, { steps: { type: 'string' }, port: { type: 'string' } })
  const port = portOption('demo', values.port)
  const { config } = loadRunConfig('tiny', integerOption('demo', 'steps', values.steps, 1))
  const host = await ctx.openHost()
  try {
    const server = await serveUi(host, ctx, port)
    try {
      const code = await followNewRun(ctx, host, { name: 'demo', config, dataset: { path: bundledCorpus() } })
      if (code !== 0) return code
      ctx.out.write(`The workbench stays open at ${server.url}\nCtrl-C to quit.\n`)
      await untilInterrupted(ctx)
      return 0
    } finally {
      await server.close()
    }
  } finally {
    await host.close()
  }
}
