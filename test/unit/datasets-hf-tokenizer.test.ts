import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { afterAll, describe, expect, it } from 'vitest'

import { loadHfTokenizer, prepareDataset } from '../../main/host/datasets'

const dir = mkdtempSync(join(tmpdir(), 'moe-hf-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const special = (id: number, content: string) =>
  ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true })

// A hand-written WordLevel tokenizer.json: whitespace/punctuation split, six words, </s> as EOS.
function writeWordLevel(name: string, extraVocab: Record<string, number> = {}): string {
  const file = join(dir, name)
  writeFileSync(file, JSON.stringify({
    version: '1.0', truncation: null, padding: null,
    added_tokens: [special(0, '[UNK]'), special(1, '</s>')],
    normalizer: null, pre_tokenizer: { type: 'Whitespace' }, post_processor: null, decoder: null,
    model: { type: 'WordLevel', unk_token: '[UNK]', vocab: { '[UNK]': 0, '</s>': 1, hello: 2, world: 3, '!': 4, the: 5, ...extraVocab } },
  }))
  return file
}

// A hand-written byte-level BPE: merges a+b, then Ġ+ab.
function writeBpe(): string {
  const file = join(dir, 'bpe-tokenizer.json')
  writeFileSync(file, JSON.stringify({
    version: '1.0', added_tokens: [], normalizer: null,
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
    post_processor: null, decoder: { type: 'ByteLevel' },
    model: {
      type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
      fuse_unk: false, byte_fallback: false, vocab: { a: 0, b: 1, ab: 2, 'Ġ': 3, 'Ġab': 4, c: 5, 'Ċ': 6 }, merges: ['a b', 'Ġ ab'],
    },
  }))
  return file
}

describe('Hugging Face tokenizer.json', () => {
  it('encodes a WordLevel vocabulary and finds its end-of-sequence token', async () => {
    const tok = await loadHfTokenizer(writeWordLevel('wl.json'))
    expect(tok.encode('hello world! the')).toEqual([2, 3, 4, 5])
    expect(tok.vocabSize).toBe(6)
    expect(tok.separator).toEqual([1])
    expect(tok.id).toMatch(/^hf:[0-9a-f]{64}$/)
  })

  it('applies BPE merges', async () => {
    const tok = await loadHfTokenizer(writeBpe())
    expect(tok.encode('ab abc')).toEqual([2, 4, 5])
    // No EOS token: records end with the encoding of a newline.
    expect(tok.separator).toEqual([6])
  })

  it('tokenizes JSONL prompt/completion records into a masked shard with its vocabulary size', async () => {
    const tokenizer = writeWordLevel('wl-shard.json')
    const data = join(dir, 'qa.jsonl')
    writeFileSync(data, '{"prompt": "hello", "completion": "world !"}\n{"text": "the world"}\n')
    const out = await prepareDataset({ path: data, tokenizer }, join(dir, 'cache'))
    expect(out).toMatchObject({ vocabSize: 6, tokens: 7 })
    const buf = readFileSync(out.path)
    expect(buf.readUInt32LE(8)).toBe(2)
    expect(buf.readUInt32LE(12)).toBe(1)
    expect(Array.from({ length: 7 }, (_, i) => buf.readUInt16LE(64 + 2 * i))).toEqual([2, 3, 4, 1, 5, 3, 1])
    expect([...buf.subarray(64 + 14)]).toEqual([0, 1, 1, 1, 1, 1, 1])
  })

  it('writes uint32 tokens when the vocabulary exceeds 65536', async () => {
    const tokenizer = writeWordLevel('wl-big.json', { big: 70000 })
    const data = join(dir, 'big.txt')
    writeFileSync(data, 'hello big world')
    const out = await prepareDataset({ path: data, tokenizer }, join(dir, 'cache'))
    const buf = readFileSync(out.path)
    expect(out.vocabSize).toBe(70001)
    expect(buf.readUInt32LE(8)).toBe(4)
    expect(buf.length).toBe(64 + 4 * 3)
    expect([0, 1, 2].map((i) => buf.readUInt32LE(64 + 4 * i))).toEqual([2, 70000, 3])
  })

  it('keys the cache on the tokenizer as well as the data', async () => {
    const data = join(dir, 'same.txt')
    writeFileSync(data, 'hello world')
    const cache = join(dir, 'cache')
    const bytes = await prepareDataset({ path: data }, cache)
    const words = await prepareDataset({ path: data, tokenizer: writeWordLevel('wl-key.json') }, cache)
    expect(words.path).not.toBe(bytes.path)
    expect([bytes.tokens, words.tokens]).toEqual([11, 2])
  })

  it('names the line and field of text the tokenizer cannot encode, and writes nothing', async () => {
    const data = join(dir, 'unknown.jsonl')
    writeFileSync(data, '{"prompt": "hello", "completion": "world"}\n{"prompt": "hello", "completion": "zebra"}\n')
    const cache = join(dir, 'cache-unknown')
    await expect(prepareDataset({ path: data, tokenizer: writeWordLevel('wl-unk.json') }, cache))
      .rejects.toThrow(`${data} line 2 field "completion": the tokenizer produced undefined`)
    expect(existsSync(cache)).toBe(false)
  })

  it('rejects a file that is not a tokenizer.json', async () => {
    const file = join(dir, 'not-a-tokenizer.json')
    writeFileSync(file, '{"vocab": {}}')
    await expect(loadHfTokenizer(file)).rejects.toThrow(`${file} field "model": is not a Hugging Face tokenizer.json`)
  })
})
