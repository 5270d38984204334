// Hugging Face `tokenizer.json` files (any model type the pure-JS @huggingface/tokenizers supports),
// loaded offline. tokenizer_config.json beside it, when present, supplies the end-of-sequence token.
import { createHash } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'

import { Tokenizer } from '@huggingface/tokenizers'

import { loadChatTemplate } from './chat-template'
import { endOfTurnMarker } from './chat-spans'
import { DatasetError } from './errors'
import type { TextTokenizer } from './tokenizer'

// Names models use for their end-of-sequence token, tried when tokenizer_config.json does not say.
const EOS_CANDIDATES = ['</s>', '<|endoftext|>', '<eos>', '<|end_of_text|>', '[SEP]']

async function readJson(file: string, required: boolean): Promise<{ text: string; value: unknown } | null> {
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (e) {
    if (!required && (e as NodeJS.ErrnoException).code === 'ENOENT') return null
    throw new DatasetError(file, `cannot read the tokenizer: ${(e as Error).message}`)
  }
  try {
    return { text, value: JSON.parse(text) }
  } catch (e) {
    throw new DatasetError(file, `is not valid JSON: ${(e as Error).message}`)
  }
}

function eosTokenOf(config: unknown): string | undefined {
  if (typeof config !== 'object' || config === null) return undefined
  const eos = (config as { eos_token?: unknown }).eos_token
  if (typeof eos === 'string') return eos
  // Older configs store AddedToken objects: {"content": "</s>", ...}.
  if (typeof eos === 'object' && eos !== null && typeof (eos as { content?: unknown }).content === 'string')
    return (eos as { content: string }).content
  return undefined
}

export async function loadHfTokenizer(file: string): Promise<TextTokenizer> {
  const json = await readJson(file, true)
  if (!json || typeof json.value !== 'object' || json.value === null || !('model' in json.value))
    throw new DatasetError(file, 'is not a Hugging Face tokenizer.json (no "model" field)', undefined, 'model')
  const configFile = join(dirname(file), 'tokenizer_config.json')
  const config = await readJson(configFile, false)

  let tokenizer: Tokenizer
  try {
    tokenizer = new Tokenizer(json.value, (config?.value as object | undefined) ?? {})
  } catch (e) {
    throw new DatasetError(file, `cannot build the tokenizer: ${(e as Error).message}`)
  }
  const vocab = tokenizer.get_vocab(true)
  if (vocab.size === 0) throw new DatasetError(file, 'the tokenizer has an empty vocabulary', undefined, 'model')
  let maxId = -1
  for (const id of vocab.values()) maxId = Math.max(maxId, id)

  const eosNames = [eosTokenOf(config?.value), ...EOS_CANDIDATES].filter((n): n is string => n !== undefined)
  const eosId = eosNames.map((n) => tokenizer.token_to_id(n)).find((id) => id !== undefined)

  const encode = (text: string): number[] => tokenizer.encode(text, { add_special_tokens: false }).ids
  const template = await loadChatTemplate(file)
  const hash = createHash('sha256').update(json.text).update('\0').update(config?.text ?? '')
  if (template) hash.update('\0').update(template.text)
  const id = hash.digest('hex')
  return {
    ...(template ? { chat: { template, marker: endOfTurnMarker(template) } } : {}),
    id: `hf:${id}`,
    vocabSize: maxId + 1,
    separator: eosId === undefined ? encode('\n') : [eosId],
    encode,
    decode: (ids) => tokenizer.decode([...ids]),
  }
}
