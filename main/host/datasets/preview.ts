// The first records of a dataset as training sees them, for the New-run form's data preview: each record's
// tokens decoded back to text in runs of trained and masked tokens (a conversation shows its template's
// rendering, with only the assistant turns trained), its token count, and whether the sequence length cuts it.
import { readFile } from 'node:fs/promises'
import { resolve } from 'node:path'

import type { DataPreview, DatasetSpec } from '../../api/contract'
import { DatasetError } from './errors'
import { parseJsonlRecord } from './jsonl-record'
import { isTokenShard, loadTokenizer } from './prepare'
import { recordTokens, type RecordTokens } from './tokenize-file'
import type { TextTokenizer } from './tokenizer'

// A text file's preview: its first characters as one record.
const TEXT_PREVIEW_CHARS = 2000

function segments(tokenizer: TextTokenizer, { ids, targets }: RecordTokens): DataPreview['records'][number]['segments'] {
  const out: DataPreview['records'][number]['segments'] = []
  let from = 0
  for (let i = 1; i <= ids.length; i++) {
    if (i === ids.length || targets[i] !== targets[from]) {
      out.push({ text: tokenizer.decode(ids.slice(from, i)), trained: targets[from] === 1, tokens: i - from })
      from = i
    }
  }
  return out
}

export async function previewDataset(spec: DatasetSpec, count: number, seqLen?: number): Promise<DataPreview> {
  const file = resolve(spec.path)
  if (isTokenShard(file)) throw new DatasetError(file, 'is a token shard: there is no text to preview')
  const tokenizer = await loadTokenizer(spec.tokenizer)
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (e) {
    throw new DatasetError(file, (e as NodeJS.ErrnoException).code === 'ENOENT' ? 'does not exist' : (e as Error).message)
  }
  const template = tokenizer.chat ? tokenizer.chat.template.source : null
  const records: DataPreview['records'] = []
  const cut = (tokens: number) => seqLen !== undefined && tokens > seqLen
  if (!file.toLowerCase().endsWith('.jsonl')) {
    const head = text.slice(0, TEXT_PREVIEW_CHARS)
    const tokens = { ids: tokenizer.encode(head), targets: [] as (0 | 1)[] }
    tokens.targets = tokens.ids.map(() => 1)
    records.push({ line: 1, format: 'text', tokens: tokens.ids.length, overLength: false, segments: segments(tokenizer, tokens) })
    return { template, records }
  }
  const lines = text.split('\n')
  for (let i = 0; i < lines.length && records.length < count; i++) {
    const source = lines[i]!.replace(/\r$/, '')
    if (source.trim() === '') continue
    const record = parseJsonlRecord(file, i + 1, source)
    const tokens = recordTokens(file, i + 1, record, tokenizer)
    const total = tokens.ids.length + tokenizer.separator.length
    records.push({ line: i + 1, format: record.kind, tokens: total, overLength: cut(total), segments: segments(tokenizer, tokens) })
  }
  return { template, records }
}
