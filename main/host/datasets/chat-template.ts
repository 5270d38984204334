// A model's own chat template: `chat_template` in tokenizer_config.json (a string, or a list of named
// templates of which "default" is taken) or chat_template.jinja beside tokenizer.json, rendered as
// transformers' apply_chat_template renders it: the messages, add_generation_prompt and the tokenizer's special
// tokens (bos_token, eos_token, ...) in the context, on @huggingface/jinja (a Jinja made for these templates,
// which defines raise_exception itself).
import { readFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'

import { Template } from '@huggingface/jinja'

import { DatasetError } from './errors'
import type { ChatMessage } from './jsonl-record'

export interface ChatTemplate {
  /** Where it came from, for messages: "…/tokenizer_config.json chat_template". */
  source: string
  /** The template's text (a cache key part: a changed template changes the tokens). */
  text: string
  render(messages: readonly ChatMessage[], addGenerationPrompt: boolean): string
}

const SPECIAL_TOKEN_KEYS = ['bos_token', 'eos_token', 'unk_token', 'pad_token', 'sep_token', 'cls_token', 'mask_token'] as const

// Older configs store special tokens as AddedToken objects: {"content": "</s>", ...}.
function tokenText(value: unknown): string | undefined {
  if (typeof value === 'string') return value
  if (typeof value === 'object' && value !== null && typeof (value as { content?: unknown }).content === 'string')
    return (value as { content: string }).content
  return undefined
}

function templateOf(config: Record<string, unknown>, file: string): string | undefined {
  const t = config.chat_template
  if (t === undefined || t === null) return undefined
  if (typeof t === 'string') return t
  if (Array.isArray(t)) {
    const named = t.find((x) => typeof x === 'object' && x !== null && (x as { name?: unknown }).name === 'default')
    if (named && typeof (named as { template?: unknown }).template === 'string') return (named as { template: string }).template
    throw new DatasetError(file, 'has several chat templates and none named "default"', undefined, 'chat_template')
  }
  throw new DatasetError(file, `is ${typeof t}, expected a string or a list of named templates`, undefined, 'chat_template')
}

async function readOptional(file: string): Promise<string | null> {
  try {
    return await readFile(file, 'utf8')
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null
    throw new DatasetError(file, `cannot be read: ${(e as Error).message}`)
  }
}

/** The chat template beside a tokenizer.json, or null when the model has none. */
export async function loadChatTemplate(tokenizerFile: string): Promise<ChatTemplate | null> {
  const dir = dirname(tokenizerFile)
  const configFile = join(dir, 'tokenizer_config.json')
  const configText = await readOptional(configFile)
  let config: Record<string, unknown> = {}
  if (configText !== null) {
    try {
      const parsed: unknown = JSON.parse(configText)
      if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) config = parsed as Record<string, unknown>
    } catch (e) {
      throw new DatasetError(configFile, `is not valid JSON: ${(e as Error).message}`)
    }
  }
  const jinjaFile = join(dir, 'chat_template.jinja')
  const fromFile = await readOptional(jinjaFile)
  const text = fromFile ?? templateOf(config, configFile)
  if (text === undefined) return null
  const source = fromFile !== null ? jinjaFile : `${configFile} chat_template`
  let template: Template
  try {
    template = new Template(text)
  } catch (e) {
    throw new DatasetError(source, `is not a template this workbench can parse: ${(e as Error).message}`)
  }
  const special: Record<string, string> = {}
  for (const key of SPECIAL_TOKEN_KEYS) {
    const token = tokenText(config[key])
    if (token !== undefined) special[key] = token
  }
  return {
    source,
    text,
    render(messages, addGenerationPrompt) {
      try {
        return template.render({
          ...special,
          messages: messages.map((m) => ({ ...m })),
          add_generation_prompt: addGenerationPrompt,
        })
      } catch (e) {
        throw new DatasetError(source, `failed to render: ${(e as Error).message}`)
      }
    },
  }
}
