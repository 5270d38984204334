// Turns a .jsonl or text file into a token shard in memory.
//   text (.txt, or any other name but .jsonl): the whole file is one stream of targets (byte tokenizer: exactly the file's bytes).
//   .jsonl: each record's tokens, then the tokenizer's separator; prompt tokens are masked.
import type { TextTokenizer } from './tokenizer'
import { TokenBuilder } from './token-builder'
import { DatasetError } from './errors'
import { parseJsonlRecord } from './jsonl-record'
import type { TokenShard } from './token-shard'
import { decodeUtf8 } from './utf8'

// Text goes to a tokenizer in pieces of about this many characters, cut after a newline, so the
// JS tokenizer's regexes never run over a whole large file at once.
const TEXT_PIECE_CHARS = 1 << 16
// Tokenizing runs in the host's process (Electron main included): it yields to the event loop
// every so many pieces or records, so windows and sockets stay responsive during a large file.
const PIECES_PER_YIELD = 4
const RECORDS_PER_YIELD = 2000

const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve))

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

async function tokenizeJsonl(file: string, bytes: Uint8Array, tokenizer: TextTokenizer): Promise<TokenShard> {
  const builder = new TokenBuilder(tokenizer.vocabSize)
  const lines = decodeUtf8(file, bytes).split('\n')
  for (let index = 0; index < lines.length; index++) {
    if (index % RECORDS_PER_YIELD === RECORDS_PER_YIELD - 1) await yieldToEventLoop()
    const line = index + 1
    const raw = lines[index]!
    const source = raw.endsWith('\r') ? raw.slice(0, -1) : raw
    if (source.trim() === '') continue
    const record = parseJsonlRecord(file, line, source)
    if (record.kind === 'text') {
      builder.push(tokenizer.encode(record.text), 1, { file, line, field: 'text' })
    } else {
      builder.push(tokenizer.encode(record.prompt), 0, { file, line, field: 'prompt' })
      builder.push(tokenizer.encode(record.completion), 1, { file, line, field: 'completion' })
    }
    builder.push(tokenizer.separator, 1, { file, line })
  }
  return builder.finish()
}

export async function tokenizeFile(file: string, bytes: Uint8Array, tokenizer: TextTokenizer): Promise<TokenShard> {
  const shard = file.toLowerCase().endsWith('.jsonl') ? await tokenizeJsonl(file, bytes, tokenizer) : await tokenizeText(file, bytes, tokenizer)
  if (shard.tokens.length < 2) throw new DatasetError(file, `has ${shard.tokens.length} tokens; training needs at least 2 (is the file empty?)`)
  return shard
}
