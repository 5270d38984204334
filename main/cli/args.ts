// Argument parsing on node:util's parseArgs, turning its errors and bad numbers into usage errors.
import { parseArgs, type ParseArgsConfig } from 'node:util'

import { UsageError } from './usage'

type Options = NonNullable<ParseArgsConfig['options']>
type ParsedValues<O extends Options> = ReturnType<typeof parseArgs<{ options: O; strict: true; allowPositionals: boolean }>>['values']

export function parseCommandArgs<O extends Options>(
  command: string,
  argv: string[],
  options: O,
  positionals: string[] = [],
): { values: ParsedValues<O>; positionals: string[] } {
  let parsed
  try {
    parsed = parseArgs({ args: argv, options, allowPositionals: positionals.length > 0, strict: true })
  } catch (e) {
    throw new UsageError(`${command}: ${(e as Error).message}`)
  }
  if (parsed.positionals.length !== positionals.length)
    throw new UsageError(positionals.length === 0
      ? `${command}: takes no arguments besides options`
      : `${command}: needs ${positionals.map((p) => p.toUpperCase()).join(' ')}`)
  return { values: parsed.values, positionals: parsed.positionals }
}

export function integerOption(command: string, name: string, value: string | undefined, min: number): number | undefined {
  if (value === undefined) return undefined
  const n = Number(value)
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < min)
    throw new UsageError(`${command}: --${name} must be an integer >= ${min}, got "${value}"`)
  return n
}

export function requireOption(command: string, name: string, value: string | undefined): string {
  if (value === undefined) throw new UsageError(`${command}: --${name} is required`)
  return value
}
