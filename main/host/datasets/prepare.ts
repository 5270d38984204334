// DatasetSpec -> a token shard the engine can map. Text and JSONL files are tokenized once per
// (file content, tokenizer) into a content-addressed cache; a .bin shard is used where it is, after
// its header is checked against its size.
import { createHash } from 'node:crypto'
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'

import type { z } from 'zod'

import type { DatasetSpecSchema } from '../../api/contract'
import { byteTokenizer } from './byte-tokenizer'
import { DatasetError } from './errors'
import { loadHfTokenizer } from './hf-tokenizer'
import type { TextTokenizer } from './tokenizer'
import { tokenizeFile, type RecordCounts } from './tokenize-file'
import { readShardHeader, writeTokenShard } from './token-shard'

export type DatasetSpec = z.output<typeof DatasetSpecSchema>

export interface PreparedDataset {
  path: string
  vocabSize: number // 0 when a .bin shard does not record it
  tokens: number
  /** JSONL files: records, and how many were truncated or dropped for the sequence length. */
  records?: RecordCounts
}

export interface PrepareOptions {
  /** The run's train.seq_len: what overflow and unpacked records are measured against. */
  seqLen?: number
}

// Bumped whenever tokenization changes what a cached shard would contain.
const CACHE_FORMAT = 2

export const isTokenShard = (file: string) => file.toLowerCase().endsWith('.bin')

export async function loadTokenizer(tokenizerFile: string | undefined): Promise<TextTokenizer> {
  return tokenizerFile === undefined ? byteTokenizer : loadHfTokenizer(resolve(tokenizerFile))
}

async function requireFile(file: string): Promise<void> {
  let info
  try {
    info = await stat(file)
  } catch (e) {
    throw new DatasetError(file, (e as NodeJS.ErrnoException).code === 'ENOENT' ? 'does not exist' : (e as Error).message)
  }
  if (!info.isFile()) throw new DatasetError(file, 'is not a regular file')
}

// The record counts live beside a cached shard (the shard's header has no room for them).
const countsFile = (shard: string) => shard.replace(/\.bin$/, '.records.json')

async function cachedShard(path: string, jsonl: boolean): Promise<PreparedDataset | null> {
  try {
    const header = await readShardHeader(path)
    const records = jsonl ? (JSON.parse(await readFile(countsFile(path), 'utf8')) as RecordCounts) : undefined
    return { path, vocabSize: header.vocabSize, tokens: header.tokens, ...(records ? { records } : {}) }
  } catch {
    // Missing, or damaged by something outside us: tokenize again and replace it atomically.
    return null
  }
}

export async function prepareDataset(spec: DatasetSpec, cacheDir: string, options: PrepareOptions = {}): Promise<PreparedDataset> {
  const file = resolve(spec.path)
  await requireFile(file)
  if (isTokenShard(file)) {
    if (spec.tokenizer !== undefined)
      throw new DatasetError(file, 'is already tokenized; leave the tokenizer out for a .bin token shard', undefined, 'tokenizer')
    const header = await readShardHeader(file)
    return { path: file, vocabSize: header.vocabSize, tokens: header.tokens }
  }
  const tokenizer = await loadTokenizer(spec.tokenizer)
  const kind = file.toLowerCase().endsWith('.jsonl') ? 'jsonl' : 'text'
  const overflow = spec.overflow ?? 'keep'
  const packing = spec.packing ?? true
  // Only records are cut to the sequence length: a text file is one stream whatever the options.
  const seqLen = kind === 'jsonl' && (overflow !== 'keep' || !packing) ? options.seqLen : undefined
  // One read serves both the key and the tokenizer, so the shard always matches the content hashed.
  const bytes = await readFile(file)
  const key = createHash('sha256')
    .update(`${CACHE_FORMAT}\0${kind}\0${tokenizer.id}\0${overflow}\0${packing}\0${seqLen ?? ''}\0`)
    .update(bytes)
    .digest('hex')
  const path = join(cacheDir, `${key}.bin`)
  const cached = await cachedShard(path, kind === 'jsonl')
  if (cached) return cached

  const { shard, counts } = await tokenizeFile(file, bytes, tokenizer, { seqLen, overflow, packing })
  await mkdir(cacheDir, { recursive: true })
  if (counts) await writeFile(countsFile(path), JSON.stringify(counts))
  const header = await writeTokenShard(path, shard)
  return { path, vocabSize: header.vocabSize, tokens: header.tokens, ...(counts ? { records: counts } : {}) }
}
