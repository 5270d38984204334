// Turns a .jsonl or text file into a token shard in memory.
//   text (.txt, or any other name but .jsonl): the whole file is one stream of targets (byte tokenizer: exactly the file's bytes).
//   .jsonl: each record's tokens, then the tokenizer's separator; prompt tokens are masked, and in conversations
//   everything but the assistant turns (rendered with the model's chat template, chat-spans.ts).
// Records longer than the run's sequence length are kept, truncated or dropped as the dataset says (counted);
// without packing each record starts a row of the batch: padded with masked separator tokens to seq_len.
import { renderForTraining } from './chat-spans'
import { DatasetError } from './errors'
import { parseJsonlRecord, type JsonlRecord } from './jsonl-record'
import type { TokenShard } from './token-shard'
import type { TextTokenizer } from './tokenizer'
import { TokenBuilder } from './token-builder'
import { decodeUtf8 } from './utf8'

// Text goes to a tokenizer in pieces of about this many characters, cut after a newline, so the
// JS tokenizer's regexes never run over a whole large file at once.
const TEXT_PIECE_CHARS = 1 << 16
// Tokenizing runs in the host's process (Electron main included): it yields to the event loop
// every so many pieces or records, so windows and sockets stay responsive during a large file.
const PIECES_PER_YIELD = 4
const RECORDS_PER_YIELD = 2000

const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve))

export interface RecordOptions {
  /** Tokens a training row holds (train.seq_len); overflow and packing need it. */
  seqLen?: number
  overflow: 'keep' | 'truncate' | 'drop'
  packing: boolean
}

export interface RecordCounts {
  records: number
  truncated: number
  dropped: number
}

export interface TokenizedFile {
  shard: TokenShard
  /** For .jsonl files. */
  counts: RecordCounts | null
}

function* textPieces(text: string): Generator<string> {
  let start = 0
  while (start < text.length) {
    let end = text.indexOf('\n', start + TEXT_PIECE_CHARS)
    end = end < 0 ? text.length : end + 1
    yield text.slice(start, end)
    start = end
  }
}

async function tokenizeText(file: string, bytes: Uint8Array, tokenizer: TextTokenizer): Promise<TokenShard> {
  const builder = new TokenBuilder(tokenizer.vocabSize)
  if (tokenizer.encodeBytes) {
    builder.push(tokenizer.encodeBytes(bytes), 1, { file })
    return builder.finish()
  }
  let pieces = 0
  for (const piece of textPieces(decodeUtf8(file, bytes))) {
    builder.push(tokenizer.encode(piece), 1, { file })
    if (++pieces % PIECES_PER_YIELD === 0) await yieldToEventLoop()
  }
  return builder.finish()
}

/** A record's tokens and their targets (1: trained), before the separator. */
export interface RecordTokens {
  ids: number[]
  targets: (0 | 1)[]
}

// parts: text, whether it is trained, and the record's field it came from (named when it cannot be encoded).
function pieces(tokenizer: TextTokenizer, file: string, line: number, parts: readonly [string, 0 | 1, string][]): RecordTokens {
  const ids: number[] = []
  const targets: (0 | 1)[] = []
  for (const [text, target, field] of parts) {
    if (text === '') continue
    for (const id of tokenizer.encode(text)) {
      if (!Number.isInteger(id) || id < 0 || id >= tokenizer.vocabSize)
        throw new DatasetError(file, `the tokenizer produced ${String(id)}, not a token id below its vocabulary size ${tokenizer.vocabSize} (a piece it cannot encode?)`, line, field)
      ids.push(id)
      targets.push(target)
    }
  }
  return { ids, targets }
}

/** The tokens of one record as training sees them. */
export function recordTokens(file: string, line: number, record: JsonlRecord, tokenizer: TextTokenizer): RecordTokens {
  if (record.kind === 'text') return pieces(tokenizer, file, line, [[record.text, 1, 'text']])
  if (record.kind === 'pair') return pieces(tokenizer, file, line, [[record.prompt, 0, 'prompt'], [record.completion, 1, 'completion']])
  const chat = tokenizer.chat
  if (!chat)
    throw new DatasetError(file, 'is a conversation, which needs the model’s chat template: give a tokenizer.json whose tokenizer_config.json has "chat_template" (or a chat_template.jinja beside it)', line)
  const { text, spans } = renderForTraining(chat.template, record.messages, chat.marker, file, line)
  const parts: [string, 0 | 1, string][] = []
  let at = 0
  for (const [start, end] of spans) {
    parts.push([text.slice(at, start), 0, 'messages'], [text.slice(start, end), 1, 'messages'])
    at = end
  }
  parts.push([text.slice(at), 0, 'messages'])
  return pieces(tokenizer, file, line, parts)
}

async function tokenizeJsonl(file: string, bytes: Uint8Array, tokenizer: TextTokenizer, options: RecordOptions): Promise<TokenizedFile> {
  const builder = new TokenBuilder(tokenizer.vocabSize)
  const counts: RecordCounts = { records: 0, truncated: 0, dropped: 0 }
  const { seqLen, overflow, packing } = options
  if ((overflow !== 'keep' || !packing) && seqLen === undefined)
    throw new DatasetError(file, 'truncating, dropping or unpacked records need the run’s sequence length')
  const pad = tokenizer.separator[0] ?? 0
  const lines = decodeUtf8(file, bytes).split('\n')
  for (let index = 0; index < lines.length; index++) {
    if (index % RECORDS_PER_YIELD === RECORDS_PER_YIELD - 1) await yieldToEventLoop()
    const line = index + 1
    const raw = lines[index]!
    const source = raw.endsWith('\r') ? raw.slice(0, -1) : raw
    if (source.trim() === '') continue
    const record = parseJsonlRecord(file, line, source)
    const { ids, targets } = recordTokens(file, line, record, tokenizer)
    ids.push(...tokenizer.separator)
    for (let i = 0; i < tokenizer.separator.length; i++) targets.push(1)
    counts.records++
    if (seqLen !== undefined && ids.length > seqLen && overflow !== 'keep') {
      if (overflow === 'drop') {
        counts.dropped++
        continue
      }
      ids.length = seqLen
      targets.length = seqLen
      counts.truncated++
    }
    // Unpacked: a row of the batch starts at every record, whose first token is then never a target (the row's
    // last target is the next record's first token, which must not be learnt from this record's padding).
    if (!packing && seqLen !== undefined) {
      targets[0] = 0
      const rows = Math.ceil(ids.length / seqLen)
      while (ids.length < rows * seqLen) {
        ids.push(pad)
        targets.push(0)
      }
    }
    let from = 0
    for (let i = 1; i <= ids.length; i++) {
      if (i === ids.length || targets[i] !== targets[from]) {
        builder.push(ids.slice(from, i), targets[from]!, { file, line })
        from = i
      }
    }
  }
  if (counts.records - counts.dropped === 0) throw new DatasetError(file, `all ${counts.records} records are longer than ${seqLen} tokens and were dropped`)
  return { shard: builder.finish(), counts }
}

export async function tokenizeFile(file: string, bytes: Uint8Array, tokenizer: TextTokenizer, options: RecordOptions = { overflow: 'keep', packing: true }): Promise<TokenizedFile> {
  const out = file.toLowerCase().endsWith('.jsonl')
    ? await tokenizeJsonl(file, bytes, tokenizer, options)
    : { shard: await tokenizeText(file, bytes, tokenizer), counts: null }
  if (out.shard.tokens.length < 2) throw new DatasetError(file, `has ${out.shard.tokens.length} tokens; training needs at least 2 (is the file empty?)`)
  return out
}
