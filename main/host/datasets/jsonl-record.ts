// One JSONL line, in the formats people already have:
//   {"text": ...}                          trains on every token;
//   {"prompt": ..., "completion": ...}     trains on the completion only (no template: the strings as they are);
//   {"messages": [{"role", "content"}]}    OpenAI-style chat;
//   {"conversations": [{"from", "value"}]} ShareGPT (human/gpt/system, user/assistant also taken);
//   {"instruction", "input"?, "output"}    Alpaca: one user turn (instruction, then input after a blank line)
//                                          and one assistant turn.
// The three chat formats become one list of messages, rendered with the model's chat template (chat-spans.ts);
// the loss then falls on assistant turns only. Errors name the file, the 1-based line and the field.
import { DatasetError } from './errors'

export type ChatRole = 'system' | 'user' | 'assistant'
export interface ChatMessage {
  role: ChatRole
  content: string
  /** Qwen3-style reasoning, rendered by templates that know it (between <think> tags). */
  reasoning_content?: string
}

export type JsonlRecord =
  | { kind: 'text'; text: string }
  | { kind: 'pair'; prompt: string; completion: string }
  | { kind: 'chat'; messages: ChatMessage[] }

function typeName(v: unknown): string {
  if (v === null) return 'null'
  if (Array.isArray(v)) return 'an array'
  return typeof v === 'object' ? 'an object' : `a ${typeof v}`
}

function stringField(file: string, line: number, record: Record<string, unknown>, field: string, where = field): string {
  if (!(field in record)) throw new DatasetError(file, 'is missing', line, where)
  const v = record[field]
  if (typeof v !== 'string') throw new DatasetError(file, `is ${typeName(v)}, expected a string`, line, where)
  return v
}

const SHAREGPT_ROLES: Readonly<Record<string, ChatRole>> = {
  system: 'system', human: 'user', user: 'user', gpt: 'assistant', assistant: 'assistant',
}
const ROLES: readonly ChatRole[] = ['system', 'user', 'assistant']

function messagesOf(file: string, line: number, list: unknown, field: 'messages' | 'conversations'): ChatMessage[] {
  if (!Array.isArray(list) || list.length === 0)
    throw new DatasetError(file, `is ${typeName(list)}, expected a non-empty list of turns`, line, field)
  const messages = list.map((turn, i): ChatMessage => {
    const where = `${field}[${i}]`
    if (typeof turn !== 'object' || turn === null || Array.isArray(turn))
      throw new DatasetError(file, `is ${typeName(turn)}, expected an object`, line, where)
    const t = turn as Record<string, unknown>
    if (field === 'conversations') {
      const from = stringField(file, line, t, 'from', `${where}.from`)
      const role = SHAREGPT_ROLES[from]
      if (!role) throw new DatasetError(file, `"${from}" is not one of ${Object.keys(SHAREGPT_ROLES).join(', ')}`, line, `${where}.from`)
      return { role, content: stringField(file, line, t, 'value', `${where}.value`) }
    }
    const role = stringField(file, line, t, 'role', `${where}.role`)
    if (role === 'tool' || 'tool_calls' in t)
      throw new DatasetError(file, 'tool calls and tool results are not supported in training data yet; remove the turn', line, where)
    if (!(ROLES as readonly string[]).includes(role))
      throw new DatasetError(file, `"${role}" is not one of ${ROLES.join(', ')}`, line, `${where}.role`)
    const message: ChatMessage = { role: role as ChatRole, content: stringField(file, line, t, 'content', `${where}.content`) }
    if ('reasoning_content' in t) message.reasoning_content = stringField(file, line, t, 'reasoning_content', `${where}.reasoning_content`)
    return message
  })
  if (!messages.some((m) => m.role === 'assistant'))
    throw new DatasetError(file, 'has no assistant turn, so nothing to train on', line, field)
  return messages
}

export function parseJsonlRecord(file: string, line: number, source: string): JsonlRecord {
  let value: unknown
  try {
    value = JSON.parse(source)
  } catch (e) {
    throw new DatasetError(file, `is not valid JSON: ${(e as Error).message}`, line)
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new DatasetError(file, `is ${typeName(value)}, expected an object with "text", "prompt" and "completion", "messages", "conversations" or "instruction" and "output"`, line)
  const record = value as Record<string, unknown>
  if ('tools' in record)
    throw new DatasetError(file, 'tool definitions are not supported in training data yet; remove the field', line, 'tools')
  if ('messages' in record) return { kind: 'chat', messages: messagesOf(file, line, record.messages, 'messages') }
  if ('conversations' in record) return { kind: 'chat', messages: messagesOf(file, line, record.conversations, 'conversations') }
  if ('instruction' in record || 'output' in record) {
    const instruction = stringField(file, line, record, 'instruction')
    const input = 'input' in record ? stringField(file, line, record, 'input') : ''
    return {
      kind: 'chat',
      messages: [
        { role: 'user', content: input === '' ? instruction : `${instruction}\n\n${input}` },
        { role: 'assistant', content: stringField(file, line, record, 'output') },
      ],
    }
  }
  if ('prompt' in record || 'completion' in record)
    return {
      kind: 'pair',
      prompt: stringField(file, line, record, 'prompt'),
      completion: stringField(file, line, record, 'completion'),
    }
  if ('text' in record) return { kind: 'text', text: stringField(file, line, record, 'text') }
  throw new DatasetError(file, 'has none of "text", "prompt" and "completion", "messages", "conversations", "instruction" and "output"', line)
}
