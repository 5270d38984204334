// `moe-workbench serve`: the workbench UI for a browser, until Ctrl-C.
import { integerOption, parseCommandArgs } from '../args'
import { serveUi, untilInterrupted } from '../browser-ui'
import type { CliContext } from '../context'
import { UsageError } from '../usage'

export function portOption(command: string, value: string | undefined): number | undefined {
  const port = integerOption(command, 'port', value, 0)
  if (port !== undefined && port > 65535) throw new UsageError(`${command}: --port must be at most 65535, got ${port}`)
  return port
}

export async function serve(argv: string[], ctx: CliContext): Promise<number> {
  const { values } = parseCommandArgs('serve', argv, { port: { type: 'string' } })
  const port = portOption('serve', values.port)
  const host = await ctx.openHost()
  try {
    const server = await serveUi(host, ctx, port)
    await untilInterrupted(ctx)
    ctx.out.write('closing\n')
    await server.close()
    return 0
  } finally {
    await host.close()
  }
}
