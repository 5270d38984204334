// A conversation as the model's prompt: rendered with the model's own chat template and
// add_generation_prompt (transformers' apply_chat_template), so the model answers as the assistant; the tokens
// that end its turn are the template's end-of-turn marker and the tokenizer's end-of-sequence token. A model
// without a template gets the messages' contents, one per line, and stops at its end-of-sequence token only.
import type { ChatMessage } from '../../api/contract'
import type { TextTokenizer } from '../datasets'

export interface ChatPrompt {
  text: string
  ids: number[]
  stopTokens: number[]
  /** Where the template came from; null without one. */
  template: string | null
}

export function chatPrompt(tokenizer: TextTokenizer, messages: readonly ChatMessage[]): ChatPrompt {
  const chat = tokenizer.chat
  const text = chat ? chat.template.render(messages, true) : messages.map((m) => m.content).join('\n')
  const stops = new Set<number>()
  if (chat?.marker) {
    const marker = tokenizer.encode(chat.marker)
    if (marker.length === 1) stops.add(marker[0]!)
  }
  // The separator is the end-of-sequence token when the tokenizer has one, else a newline (not an end).
  const sep = tokenizer.separator
  if (sep.length === 1 && tokenizer.decode(sep) !== '\n') stops.add(sep[0]!)
  return { text, ids: tokenizer.encode(text), stopTokens: [...stops], template: chat?.template.source ?? null }
}
