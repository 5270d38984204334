// A conversation rendered with its model's template, and the character spans the loss trains on: each
// assistant turn, from the end of the template's header for that turn (what add_generation_prompt renders)
// through the template's end-of-turn marker. Found without template-specific knowledge:
//   - the turn starts where render(messages before it, add_generation_prompt) ends, which must be a prefix of
//     the whole conversation's rendering (a template that rewrites history before a turn is refused);
//   - the end-of-turn marker is what the template writes after an assistant message's content (probed once
//     with placeholder text, trailing whitespace left out), found after the turn's start.
import { DatasetError } from './errors'
import type { ChatMessage } from './jsonl-record'
import type { ChatTemplate } from './chat-template'

export interface RenderedChat {
  text: string
  /** [start, end) character ranges of text the loss trains on, in order. */
  spans: [number, number][]
}

const PROBE_USER = 'probe-user-\u2063'
const PROBE_ASSISTANT = 'probe-assistant-\u2063'

/** What the template writes right after an assistant message's content ("" when nothing). */
export function endOfTurnMarker(template: ChatTemplate): string {
  const text = template.render(
    [
      { role: 'user', content: PROBE_USER },
      { role: 'assistant', content: PROBE_ASSISTANT },
    ],
    false,
  )
  const at = text.lastIndexOf(PROBE_ASSISTANT)
  if (at < 0) throw new DatasetError(template.source, 'does not render the assistant message’s content, so its turns cannot be found')
  return text.slice(at + PROBE_ASSISTANT.length).trimEnd()
}

export function renderForTraining(template: ChatTemplate, messages: readonly ChatMessage[], marker: string, file: string, line: number): RenderedChat {
  const text = template.render(messages, false)
  const spans: [number, number][] = []
  messages.forEach((m, i) => {
    if (m.role !== 'assistant') return
    const header = template.render(messages.slice(0, i), true)
    if (!text.startsWith(header))
      throw new DatasetError(file, `the chat template (${template.source}) renders the turns before assistant turn ${i} differently once the conversation goes on, so the turn's tokens cannot be told apart; split the conversation at that turn`, line, `messages[${i}]`)
    const start = header.length
    let end: number
    if (marker === '') {
      const next = messages.slice(0, i + 1)
      const upTo = template.render(next, false)
      end = text.startsWith(upTo) ? upTo.length : text.length
    } else {
      const at = text.indexOf(marker, start)
      if (at < 0) throw new DatasetError(file, `assistant turn ${i} has no end-of-turn marker "${marker}" after it in the rendering`, line, `messages[${i}]`)
      end = at + marker.length
    }
    spans.push([start, end])
  })
  return { text, spans }
}
