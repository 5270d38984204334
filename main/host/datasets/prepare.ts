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
import { readShardHeader, writeTokenShard, type TokenShard } from './token-shard'

export type DatasetSpec = z.output<typeof DatasetSpecSchema>

export interface PreparedDataset {
  path: string
  vocabSize: number // 0 when a .bin shard does not record it
  tokens: number
  /** JSONL files: records, and how many were truncated or dropped for the sequence length. */
  records?: RecordCounts
  /** The held-out shard (dataset.eval) and its tokens. */
  evalPath?: string
  evalTokens?: number
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

// The held-out tail of a shard: the last `fraction` of its tokens (whole rows when records are unpacked).
function splitShard(file: string, shard: TokenShard, fraction: number, row: number | undefined): [TokenShard, TokenShard] {
  let cut = Math.floor(shard.tokens.length * (1 - fraction))
  if (row !== undefined) cut -= cut % row
  if (cut < 2 || shard.tokens.length - cut < 2)
    throw new DatasetError(file, `holding out ${fraction} of its ${shard.tokens.length} tokens leaves too little on one side`, undefined, 'eval.fraction')
  const part = (from: number, to: number): TokenShard => ({
    tokens: shard.tokens.slice(from, to),
    mask: shard.mask ? shard.mask.slice(from, to) : null,
    vocabSize: shard.vocabSize,
  })
  return [part(0, cut), part(cut, shard.tokens.length)]
}

async function prepareFile(path: string, spec: DatasetSpec, tokenizer: TextTokenizer, cacheDir: string, options: PrepareOptions, fraction?: number): Promise<PreparedDataset> {
  const file = resolve(path)
  await requireFile(file)
  if (isTokenShard(file)) {
    if (spec.tokenizer !== undefined)
      throw new DatasetError(file, 'is already tokenized; leave the tokenizer out for a .bin token shard', undefined, 'tokenizer')
    if (fraction !== undefined)
      throw new DatasetError(file, 'is a token shard, which is not split here; give an evaluation file instead', undefined, 'eval.fraction')
    const header = await readShardHeader(file)
    return { path: file, vocabSize: header.vocabSize, tokens: header.tokens }
  }
  const kind = file.toLowerCase().endsWith('.jsonl') ? 'jsonl' : 'text'
  const overflow = spec.overflow ?? 'keep'
  const packing = spec.packing ?? true
  // Only records are cut to the sequence length: a text file is one stream whatever the options.
  const seqLen = kind === 'jsonl' && (overflow !== 'keep' || !packing) ? options.seqLen : undefined
  // One read serves both the key and the tokenizer, so the shard always matches the content hashed.
  const bytes = await readFile(file)
  const key = createHash('sha256')
    .update(`${CACHE_FORMAT}\0${kind}\0${tokenizer.id}\0${overflow}\0${packing}\0${seqLen ?? ''}\0${fraction ?? ''}\0`)
    .update(bytes)
    .digest('hex')
  const shardPath = join(cacheDir, `${key}.bin`)
  const evalPath = join(cacheDir, `${key}.eval.bin`)
  const cached = await cachedShard(shardPath, kind === 'jsonl')
  const cachedEval = fraction === undefined ? null : await cachedShard(evalPath, false)
  if (cached && (fraction === undefined || cachedEval)) return { ...cached, ...(cachedEval ? { evalPath, evalTokens: cachedEval.tokens } : {}) }

  const { shard, counts } = await tokenizeFile(file, bytes, tokenizer, { seqLen, overflow, packing })
  const [train, held] = fraction === undefined ? [shard, null] : splitShard(file, shard, fraction, packing ? undefined : seqLen)
  await mkdir(cacheDir, { recursive: true })
  if (counts) await writeFile(countsFile(shardPath), JSON.stringify(counts))
  const evalHeader = held ? await writeTokenShard(evalPath, held) : null
  const header = await writeTokenShard(shardPath, train)
  return {
    path: shardPath,
    vocabSize: header.vocabSize,
    tokens: header.tokens,
    ...(counts ? { records: counts } : {}),
    ...(evalHeader ? { evalPath, evalTokens: evalHeader.tokens } : {}),
  }
}

export async function prepareDataset(spec: DatasetSpec, cacheDir: string, options: PrepareOptions = {}): Promise<PreparedDataset> {
  const tokenizer = await loadTokenizer(spec.tokenizer)
  const fraction = spec.eval && 'fraction' in spec.eval ? spec.eval.fraction : undefined
  const data = await prepareFile(spec.path, spec, tokenizer, cacheDir, options, fraction)
  if (!spec.eval || !('path' in spec.eval)) return data
  const held = await prepareFile(spec.eval.path, spec, tokenizer, cacheDir, options)
  return { ...data, evalPath: held.path, evalTokens: held.tokens }
}
