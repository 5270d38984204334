// The default tokenizer: one token per UTF-8 byte (vocab 256), as `moe-engine-dev tokenize` writes.
import type { TextTokenizer } from './tokenizer'

const NEWLINE = 0x0a

export const byteTokenizer: TextTokenizer = {
  id: 'bytes',
  vocabSize: 256,
  separator: [NEWLINE],
  encode: (text) => Array.from(Buffer.from(text, 'utf8')),
  encodeBytes: (bytes) => bytes,
  decode: (ids) => Buffer.from(Uint8Array.from(ids)).toString('utf8'),
}
