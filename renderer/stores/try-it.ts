// Try it: one prompt answered by one or two models side by side (before/after: a run's base model and its
// fine-tuned checkpoint). Each side starts a generation with chat.start and fills its answer from the
// chat.token / chat.done events of its id; events that arrive before chat.start's reply are held until then.
import { defineStore } from 'pinia'
import { ref } from 'vue'

import type { ChatDoneEvent, ChatModel, ChatSampling, ChatTokenEvent, Params } from '../../main/api/contract'
import { api, type ApiClient } from '../api'
import { addToken, emptyAnswer, finish, generating, type Answer } from '../try-it/answer'
import { detailOf } from './notices'

export interface TrySide {
  model: ChatModel
  label: string
}

export type ExpertHome = 'resident' | 'host' | 'ssd'
export type ChatPrecision = 'fp32' | 'bf16'

export const useTryItStore = defineStore('try-it', () => {
  const answers = ref<Answer[]>([])
  const error = ref<string | null>(null)
  const pending = new Map<string, (ChatTokenEvent | ChatDoneEvent)[]>()
  let stopEvents: (() => void) | null = null

  function apply(event: ChatTokenEvent | ChatDoneEvent): void {
    const i = answers.value.findIndex((a) => a.id === event.id)
    if (i < 0) {
      const held = pending.get(event.id) ?? []
      pending.set(event.id, [...held, event])
      return
    }
    const a = answers.value[i]!
    answers.value[i] = 'reason' in event ? finish(a, event) : addToken(a, event)
  }

  function follow(client: ApiClient = api()): () => void {
    stopEvents?.()
    const stops = [client.on('chat.token', apply), client.on('chat.done', apply)]
    stopEvents = () => stops.forEach((s) => s())
    return () => {
      stopEvents?.()
      stopEvents = null
    }
  }

  async function ask(
    sides: TrySide[],
    messages: Params<'chat.start'>['messages'],
    sampling: Partial<ChatSampling>,
    where: { experts: ExpertHome; precision: ChatPrecision },
    client: ApiClient = api(),
  ): Promise<void> {
    error.value = null
    pending.clear()
    answers.value = sides.map((s) => emptyAnswer(s.label))
    // Both sides at once: each loads its model and generates on a worker thread of its own.
    await Promise.all(
      sides.map(async (side, i) => {
        try {
          const started = await client.invoke('chat.start', { model: side.model, messages, sampling, ...where })
          answers.value[i] = { ...answers.value[i]!, id: started.id, label: started.label, promptTokens: started.promptTokens }
          for (const e of pending.get(started.id) ?? []) apply(e)
          pending.delete(started.id)
        } catch (failure) {
          answers.value[i] = { ...answers.value[i]!, error: detailOf(failure) }
        }
      }),
    )
  }

  async function stop(client: ApiClient = api()): Promise<void> {
    await Promise.all(
      answers.value.filter(generating).map((a) => client.invoke('chat.cancel', { id: a.id! }).catch((e) => (error.value = detailOf(e)))),
    )
  }

  return { answers, error, follow, ask, stop }
})
