// Try it's answers: tokens added in order from chat.token events (stale or other answers' events ignored), the
// end, hover text and expert use; the store runs both sides of a before/after, holds events that come before
// chat.start's reply, reports a side that fails and cancels what is generating.
import { createPinia, setActivePinia } from 'pinia'
import { beforeEach, describe, expect, it } from 'vitest'

import type { ChatDoneEvent, ChatTokenEvent, EventName, EventPayload } from '../../main/api/contract'
import { useTryItStore } from '../../renderer/stores/try-it'
import { addToken, answerText, emptyAnswer, endNote, expertUse, expertsLine, finish, generating, tokenLabel, type Answer } from '../../renderer/try-it/answer'
import { fakeClient } from './compare-fixtures'

beforeEach(() => setActivePinia(createPinia()))

const token = (id: string, index: number, text: string, experts = [[index % 4, 3], [1, 2]]): ChatTokenEvent => ({
  id, index, token: 100 + index, text, layers: [1, 2], experts,
})
const done = (id: string, tokens: number, reason: ChatDoneEvent['reason'] = 'stop'): ChatDoneEvent => ({
  id, reason, error: reason === 'failed' ? 'boom' : null, tokens, text: '', tokensPerSec: 12.5,
})

describe('answer', () => {
  it('adds tokens in order and ignores other answers’ and repeated events', () => {
    let a: Answer = { ...emptyAnswer('base'), id: 'c1' }
    expect(generating(a)).toBe(true)
    for (const e of [token('c1', 0, 'Hel'), token('c2', 0, 'x'), token('c1', 1, 'lo'), token('c1', 1, 'lo'), token('c1', 3, '!')]) a = addToken(a, e)
    expect(answerText(a)).toBe('Hello')
    expect(expertsLine(a.tokens[1]!)).toBe('L1: 1, 3 · L2: 1, 2')
    a = finish(a, done('c1', 2))
    expect(generating(a)).toBe(false)
    expect(endNote(a)).toBe('2 tokens (end of turn, 12.5 tokens/s)')
    expect(finish(a, done('c1', 2, 'failed')).error).toBe('boom')
  })

  it('shows empty and newline tokens, and counts each layer’s experts over the answer', () => {
    expect(tokenLabel({ index: 0, token: 1, text: '', layers: [], experts: [] })).toBe('∅')
    expect(tokenLabel({ index: 0, token: 1, text: 'a\n', layers: [], experts: [] })).toBe('a↵\n')
    let a: Answer = { ...emptyAnswer(), id: 'c' }
    for (let i = 0; i < 3; i++) a = addToken(a, token('c', i, 't'))
    expect(expertUse(a)).toEqual([
      { layer: 1, counts: [[3, 3], [0, 1], [1, 1], [2, 1]] },
      { layer: 2, counts: [[1, 3], [2, 3]] },
    ])
  })
})

describe('try-it store', () => {
  it('answers with both sides, applying events that arrive before chat.start replies', async () => {
    const listeners: Partial<Record<EventName, (p: unknown) => void>> = {}
    let n = 0
    const fake = fakeClient({
      'chat.start': async ({ model }) => {
        const id = `c${n++}`
        // The first token of the first side arrives before its reply.
        if (id === 'c0') listeners['chat.token']!(token(id, 0, 'early'))
        return { id, modelDir: '/m', label: 'checkpoint' in model ? `run ${model.checkpoint}` : 'dir', promptTokens: 5, template: null, stopTokens: [] }
      },
      'chat.cancel': async () => ({ ok: true }) as const,
    })
    fake.on = <E extends EventName>(event: E, listener: (p: EventPayload<E>) => void) => {
      listeners[event] = listener as (p: unknown) => void
      return () => undefined
    }
    const store = useTryItStore()
    store.follow(fake)
    await store.ask(
      [{ model: { runId: 'r1', checkpoint: 'base' }, label: 'Base' }, { model: { runId: 'r1', checkpoint: 'latest' }, label: 'Fine-tuned' }],
      [{ role: 'user', content: 'hi' }],
      { maxTokens: 4 },
      { experts: 'ssd', precision: 'bf16' },
      fake,
    )
    expect(fake.calls.filter((c) => c.name === 'chat.start').map((c) => c.params)).toEqual([
      { model: { runId: 'r1', checkpoint: 'base' }, messages: [{ role: 'user', content: 'hi' }], sampling: { maxTokens: 4 }, experts: 'ssd', precision: 'bf16' },
      { model: { runId: 'r1', checkpoint: 'latest' }, messages: [{ role: 'user', content: 'hi' }], sampling: { maxTokens: 4 }, experts: 'ssd', precision: 'bf16' },
    ])
    expect(store.answers.map((a) => a.label)).toEqual(['run base', 'run latest'])
    listeners['chat.token']!(token('c1', 0, 'late'))
    expect(store.answers.map(answerText)).toEqual(['early', 'late'])
    await store.stop(fake)
    expect(fake.calls.filter((c) => c.name === 'chat.cancel').map((c) => c.params)).toEqual([{ id: 'c0' }, { id: 'c1' }])
    listeners['chat.done']!(done('c0', 1, 'cancelled'))
    expect(generating(store.answers[0]!)).toBe(false)
  })

  it('reports a side that cannot start without losing the other', async () => {
    const fake = fakeClient({
      'chat.start': async ({ model }) => {
        if ('checkpoint' in model && model.checkpoint === 'base') throw new Error('run "r1" started from random weights')
        return { id: 'ok', modelDir: '/m', label: 'Fine-tuned', promptTokens: 5, template: null, stopTokens: [] }
      },
    })
    const store = useTryItStore()
    await store.ask(
      [{ model: { runId: 'r1', checkpoint: 'base' }, label: 'Base' }, { model: { runId: 'r1', checkpoint: 'latest' }, label: 'Fine-tuned' }],
      [{ role: 'user', content: 'hi' }],
      {},
      { experts: 'resident', precision: 'fp32' },
      fake,
    )
    expect(store.answers[0]!.error).toMatch(/random weights/)
    expect(store.answers[1]!.id).toBe('ok')
  })
})
