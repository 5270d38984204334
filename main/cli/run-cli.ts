// Routes argv to a command and turns its outcome into an exit code: 0 ok, 1 failure (the message
// names the field or file), 2 usage.
import type { CliContext } from './context'
import { chat } from './commands/chat'
import { demo } from './commands/demo'
import { exportRun } from './commands/export'
import { inspect } from './commands/inspect'
import { resume } from './commands/resume'
import { runs } from './commands/runs'
import { serve } from './commands/serve'
import { show } from './commands/show'
import { train } from './commands/train'
import { verify } from './commands/verify'
import { USAGE, UsageError } from './usage'

type Command = (argv: string[], ctx: CliContext) => Promise<number>

const COMMANDS: Record<string, Command> = { train, runs, show, export: exportRun, chat, inspect, resume, verify, serve, demo }

export async function runCli(argv: string[], ctx: CliContext): Promise<number> {
  const [name, ...rest] = argv
  if (name === undefined || name === 'help' || name === '--help' || name === '-h') {
    ;(name === undefined ? ctx.err : ctx.out).write(`${USAGE}\n`)
    return name === undefined ? 2 : 0
  }
  const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined
  try {
    if (!command) throw new UsageError(`unknown command "${name}"`)
    return await command(rest, ctx)
  } catch (e) {
    if (e instanceof UsageError) {
      ctx.err.write(`moe-workbench: ${e.message}\nRun \`moe-workbench --help\` for usage.\n`)
      return 2
    }
    ctx.err.write(`moe-workbench: ${e instanceof Error ? e.message : String(e)}\n`)
    return 1
  }
}
