// One streamed answer of Try it, built from chat.token / chat.done events (testable without a DOM): its tokens in
// order with their text and experts, how it ended, and what to show when a token is hovered or picked.
import type { ChatDoneEvent, ChatTokenEvent } from '../../main/api/contract'

export interface AnswerToken {
  index: number
  token: number
  text: string
  /** The model layer of each MoE layer, and the experts it chose for this token. */
  layers: number[]
  experts: number[][]
}

export interface Answer {
  id: string | null
  label: string
  promptTokens: number
  tokens: AnswerToken[]
  done: ChatDoneEvent | null
  error: string | null
}

export const emptyAnswer = (label = ''): Answer => ({ id: null, label, promptTokens: 0, tokens: [], done: null, error: null })

/** Adds a token event (in index order; a repeated or stale index is ignored). */
export function addToken(answer: Answer, event: ChatTokenEvent): Answer {
  if (event.id !== answer.id || event.index !== answer.tokens.length) return answer
  const { index, token, text, layers, experts } = event
  return { ...answer, tokens: [...answer.tokens, { index, token, text, layers, experts }] }
}

export function finish(answer: Answer, event: ChatDoneEvent): Answer {
  if (event.id !== answer.id) return answer
  return { ...answer, done: event, error: event.reason === 'failed' ? event.error : null }
}

export const answerText = (answer: Answer): string => answer.tokens.map((t) => t.text).join('')
export const generating = (answer: Answer): boolean => answer.id !== null && answer.done === null && answer.error === null

/** "L3: 5, 12 · L4: 0, 7": each MoE layer's experts for a token (hover text). */
export function expertsLine(token: AnswerToken): string {
  return token.experts.map((chosen, m) => `L${token.layers[m]}: ${chosen.join(', ')}`).join(' · ')
}

/** How the answer ended, in words. */
export function endNote(answer: Answer): string {
  const d = answer.done
  if (!d) return answer.id ? 'generating…' : ''
  const rate = d.tokensPerSec === null ? '' : `, ${d.tokensPerSec.toFixed(1)} tokens/s`
  const why = { stop: 'end of turn', max_tokens: 'max tokens reached', length: 'the model’s context is full', cancelled: 'stopped', failed: 'failed' }[d.reason]
  return `${d.tokens} tokens (${why}${rate})`
}

/** The text a token shows as (whitespace made visible so an all-space token can still be hovered). */
export function tokenLabel(token: AnswerToken): string {
  if (token.text === '') return '∅'
  return token.text.replace(/\n/g, '↵\n')
}

/**
 * Per MoE layer, how many of the answer's tokens each expert computed: the answer's expert use at a glance
 * ([MoE layer] of [expert, count] sorted by count, then expert).
 */
export function expertUse(answer: Answer): { layer: number; counts: [number, number][] }[] {
  const first = answer.tokens[0]
  if (!first) return []
  return first.layers.map((layer, m) => {
    const counts = new Map<number, number>()
    for (const t of answer.tokens) for (const e of t.experts[m] ?? []) counts.set(e, (counts.get(e) ?? 0) + 1)
    return { layer, counts: [...counts].sort((a, b) => b[1] - a[1] || a[0] - b[0]) }
  })
}
