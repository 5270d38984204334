// `moe-workbench chat RUN|DIR`: talk to a model folder (Hugging Face or one of our checkpoints) or a run's
// checkpoint (--step N, default the latest; --base: the weights the run started from), with the model's own chat
// template, streaming the answer to stdout. --prompt answers once (for scripts); without it each line read is a
// user turn of one conversation. --experts prints, after each answer, the experts each MoE layer chose for every
// token; --offload keeps the routed experts in the host or SSD tier behind a cache of device slots; --precision bf16
// computes the linear layers on bf16 weights.
import { existsSync, statSync } from 'node:fs'
import { resolve } from 'node:path'
import { createInterface } from 'node:readline'

import type { ChatDoneEvent, ChatMessage, ChatTokenEvent, Params } from '../../api/contract'
import { parseParams } from '../../api/contract'
import type { Host } from '../../host/host'
import { integerOption, parseCommandArgs } from '../args'
import type { CliContext } from '../context'
import { UsageError } from '../usage'

const OPTIONS = {
  prompt: { type: 'string' },
  system: { type: 'string' },
  temperature: { type: 'string' },
  'top-p': { type: 'string' },
  'top-k': { type: 'string' },
  'max-tokens': { type: 'string' },
  seed: { type: 'string' },
  step: { type: 'string' },
  base: { type: 'boolean' },
  'base-model': { type: 'string' },
  tokenizer: { type: 'string' },
  experts: { type: 'boolean' },
  offload: { type: 'string' },
  precision: { type: 'string' },
} as const

function numberOption(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined
  const n = Number(value)
  if (value.trim() === '' || !Number.isFinite(n)) throw new UsageError(`chat: --${name} must be a number, got "${value}"`)
  return n
}

const isDirectory = (p: string) => existsSync(p) && statSync(p).isDirectory()

// The experts under an answer: one line per token, its text and each MoE layer's chosen experts.
export function formatExperts(tokens: readonly ChatTokenEvent[]): string {
  return tokens
    .map((t) => {
      const layers = t.experts.map((chosen, m) => `L${t.layers[m]}: ${chosen.join(',')}`).join('  ')
      return `  ${String(t.index).padStart(4)}  ${JSON.stringify(t.text).padEnd(14)}  ${layers}\n`
    })
    .join('')
}

// One answer: starts the generation and streams its text until the done event.
async function answer(host: Host, params: Params<'chat.start'>, ctx: CliContext, showExperts: boolean): Promise<ChatDoneEvent> {
  const tokens: ChatTokenEvent[] = []
  let id: string | null = null
  const early: (ChatTokenEvent | ChatDoneEvent)[] = []
  let finish!: (e: ChatDoneEvent) => void
  const done = new Promise<ChatDoneEvent>((r) => (finish = r))
  const onToken = (t: ChatTokenEvent) => {
    tokens.push(t)
    ctx.out.write(t.text)
  }
  const stopListening = host.onEvent((name, payload) => {
    if (name !== 'chat.token' && name !== 'chat.done') return
    const event = payload as ChatTokenEvent | ChatDoneEvent
    if (id === null) return void early.push(event)
    if (event.id !== id) return
    if (name === 'chat.token') onToken(event as ChatTokenEvent)
    else finish(event as ChatDoneEvent)
  })
  const stopInterrupt = ctx.onInterrupt(() => {
    if (id !== null) void host.handlers['chat.cancel']({ id }).catch(() => {})
  })
  try {
    const started = await host.handlers['chat.start'](parseParams('chat.start', params))
    id = started.id
    for (const e of early.filter((e) => e.id === started.id)) {
      if ('reason' in e) finish(e)
      else onToken(e)
    }
    const end = await done
    ctx.out.write('\n')
    if (showExperts) ctx.out.write(`experts per token (${started.label}):\n${formatExperts(tokens)}`)
    if (end.reason === 'failed') throw new Error(end.error ?? 'generation failed')
    return end
  } finally {
    stopListening()
    stopInterrupt()
  }
}

export async function chat(argv: string[], ctx: CliContext): Promise<number> {
  const { values, positionals } = parseCommandArgs('chat', argv, OPTIONS, ['run'])
  const target = positionals[0]!
  const offload = values.offload ?? 'resident'
  if (!['resident', 'host', 'ssd'].includes(offload)) throw new UsageError(`chat: --offload must be host or ssd, got "${offload}"`)
  const precision = values.precision ?? 'fp32'
  if (precision !== 'fp32' && precision !== 'bf16') throw new UsageError(`chat: --precision must be fp32 or bf16, got "${precision}"`)
  const step = integerOption('chat', 'step', values.step, 0)
  if (step !== undefined && values.base) throw new UsageError('chat: --step and --base choose different weights; give one')
  const folder = isDirectory(target)
  if (values['base-model'] !== undefined && !folder)
    throw new UsageError('chat: --base-model is the base of a PEFT adapter folder; for a run, --base answers with its base')
  const model = folder
    ? { dir: resolve(target), ...(values['base-model'] !== undefined ? { base: resolve(values['base-model']) } : {}) }
    : { runId: target, checkpoint: values.base ? ('base' as const) : (step ?? ('latest' as const)) }
  const sampling = {
    temperature: numberOption('temperature', values.temperature),
    topP: numberOption('top-p', values['top-p']),
    topK: integerOption('chat', 'top-k', values['top-k'], 0),
    maxTokens: integerOption('chat', 'max-tokens', values['max-tokens'], 1),
    seed: integerOption('chat', 'seed', values.seed, 0),
  }
  const request = (messages: ChatMessage[]): Params<'chat.start'> => ({
    model,
    messages,
    sampling: Object.fromEntries(Object.entries(sampling).filter(([, v]) => v !== undefined)),
    experts: offload as 'resident' | 'host' | 'ssd',
    precision,
    ...(values.tokenizer ? { tokenizer: resolve(values.tokenizer) } : {}),
  })
  const history: ChatMessage[] = values.system ? [{ role: 'system', content: values.system }] : []

  const host = await ctx.openHost({ recoverRuns: false })
  try {
    if (values.prompt !== undefined) {
      const end = await answer(host, request([...history, { role: 'user', content: values.prompt }]), ctx, values.experts ?? false)
      return end.reason === 'cancelled' ? 130 : 0
    }
    const lines = createInterface({ input: process.stdin, terminal: false })
    ctx.err.write('type a message and press Enter; Ctrl-D ends the conversation\n')
    for await (const line of lines) {
      if (!line.trim()) continue
      history.push({ role: 'user', content: line })
      const end = await answer(host, request(history), ctx, values.experts ?? false)
      history.push({ role: 'assistant', content: end.text })
    }
    return 0
  } finally {
    await host.close()
  }
}
