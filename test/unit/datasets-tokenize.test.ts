import { execFileSync } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'

import { afterAll, beforeAll, describe, expect, it } from 'vitest'

import { byteTokenizer, DatasetError, prepareDataset } from '../../main/host/datasets'

const ENGINE = resolve('native/build/moe-engine')
const ENGINE_DEV = resolve('native/build/moe-engine-dev')
const BOTH = existsSync(ENGINE) && existsSync(ENGINE_DEV)
let dir: string
let cache: string

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'moe-ds-'))
  cache = join(dir, 'cache')
})
afterAll(() => rmSync(dir, { recursive: true, force: true }))

function header(buf: Buffer) {
  return {
    magic: buf.toString('latin1', 0, 8),
    tokenBytes: buf.readUInt32LE(8),
    flags: buf.readUInt32LE(12),
    tokens: Number(buf.readBigUInt64LE(16)),
    vocab: buf.readUInt32LE(24),
    reserved: [...buf.subarray(28, 64)],
  }
}

// The shard's uint16 tokens from byte 64 on.
const tokensOf = (buf: Buffer, n: number) => Array.from({ length: n }, (_, i) => buf.readUInt16LE(64 + 2 * i))

describe('byte tokenizer', () => {
  it('round-trips UTF-8 text through byte ids', () => {
    const text = 'héllo, wörld — ∑ 🙂\n'
    const ids = byteTokenizer.encode(text)
    expect(ids.length).toBe(Buffer.byteLength(text))
    expect(ids.every((i) => i >= 0 && i < 256)).toBe(true)
    expect(byteTokenizer.decode(ids)).toBe(text)
  })
})

describe('text files', () => {
  it('writes the exact shard the engine reads: header, uint16 bytes, no mask', async () => {
    const text = 'The quick brown fox jumps over the lazy dog.\n'.repeat(40)
    const file = join(dir, 'fox.txt')
    writeFileSync(file, text)
    const out = await prepareDataset({ path: file }, cache)
    expect(out).toMatchObject({ vocabSize: 256, tokens: text.length })
    const buf = readFileSync(out.path)
    expect(header(buf)).toEqual({ magic: 'MOETOK01', tokenBytes: 2, flags: 0, tokens: text.length, vocab: 256, reserved: new Array(36).fill(0) })
    expect(buf.length).toBe(64 + 2 * text.length)
    expect(tokensOf(buf, text.length)).toEqual([...Buffer.from(text)])
  })

  it.runIf(BOTH)('is byte-identical to `moe-engine-dev tokenize` and trains a step in the engine', async () => {
    const file = join(dir, 'engine.txt')
    writeFileSync(file, 'abcdefgh ijklmnop qrstuvwxyz.\n'.repeat(20))
    const ours = await prepareDataset({ path: file }, cache)
    const theirs = join(dir, 'engine-cli.bin')
    execFileSync(ENGINE_DEV, ['tokenize', '--bytes', file, '--out', theirs])
    expect(readFileSync(ours.path).equals(readFileSync(theirs))).toBe(true)

    const config = join(dir, 'tiny.json')
    writeFileSync(config, JSON.stringify({
      model: { arch: 'mixtral', vocab_size: 256, d_model: 16, n_layers: 1, n_heads: 2, max_seq_len: 16, d_ff: 16, n_experts: 2, top_k: 1 },
      train: { batch_size: 2, seq_len: 16, steps: 1, warmup_steps: 0, threads: 1 },
    }))
    const log = execFileSync(ENGINE, ['train', '--config', config, '--data', ours.path, '--out', join(dir, 'run')], { encoding: 'utf8' })
    expect(log).toMatch(/step 1\/1 \| loss \d/)
  })
})

describe('jsonl files', () => {
  it('trains on every token of {"text"} records, separated by newlines', async () => {
    const file = join(dir, 'texts.jsonl')
    writeFileSync(file, '{"text": "ab"}\n\n{"text": "c"}\r\n')
    const out = await prepareDataset({ path: file }, cache)
    const buf = readFileSync(out.path)
    expect(header(buf)).toMatchObject({ flags: 0, tokens: 5 })
    expect(buf.length).toBe(64 + 2 * 5)
    expect(tokensOf(buf, 5)).toEqual([97, 98, 10, 99, 10])
  })

  it('masks prompt tokens out of the loss and keeps completions and separators', async () => {
    const file = join(dir, 'pairs.jsonl')
    writeFileSync(file, '{"prompt": "Q:", "completion": "A"}\n{"text": "t"}\n{"prompt": "xy", "completion": "z"}\n')
    const out = await prepareDataset({ path: file }, cache)
    const buf = readFileSync(out.path)
    const n = 10
    expect(header(buf)).toMatchObject({ tokenBytes: 2, flags: 1, tokens: n })
    expect(buf.length).toBe(64 + 3 * n)
    expect(Buffer.from(tokensOf(buf, n)).toString()).toBe('Q:A\nt\nxyz\n')
    expect([...buf.subarray(64 + 2 * n)]).toEqual([0, 0, 1, 1, 1, 1, 0, 0, 1, 1])
  })

  it.runIf(existsSync(ENGINE_DEV))('matches `moe-engine-dev tokenize --jsonl` byte for byte', async () => {
    const file = join(dir, 'engine-pairs.jsonl')
    writeFileSync(file, '{"prompt": "2+2=", "completion": "4"}\n{"prompt": "é?", "completion": "ü"}\n')
    const ours = await prepareDataset({ path: file }, cache)
    const theirs = join(dir, 'engine-pairs.bin')
    execFileSync(ENGINE_DEV, ['tokenize', '--jsonl', file, '--out', theirs])
    expect(readFileSync(ours.path).equals(readFileSync(theirs))).toBe(true)
  })

  it.each([
    ['{"prompt": "a", "completion": 3}\n', 'line 2 field "completion": is a number, expected a string'],
    ['{"prompt": "a"}\n', 'line 2 field "completion": is missing'],
    ['{"text": null}\n', 'line 2 field "text": is null, expected a string'],
    ['{"text": "a"\n', 'line 2: is not valid JSON'],
    ['[1]\n', 'line 2: is an array, expected an object'],
  ])('rejects %j naming the file, line and field, leaving no file', async (bad, message) => {
    const badCache = mkdtempSync(join(dir, 'bad-cache-'))
    const file = join(dir, 'bad.jsonl')
    writeFileSync(file, `{"text": "fine"}\n${bad}{"text": "after"}\n`)
    const error = await prepareDataset({ path: file }, badCache).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(DatasetError)
    expect((error as Error).message).toContain(`${file} ${message}`)
    expect(readdirSync(badCache)).toEqual([])
  })
})

describe('.bin token shards', () => {
  it('pass through after header validation', async () => {
    const src = join(dir, 'pass.txt')
    writeFileSync(src, 'hello shard world')
    const shard = await prepareDataset({ path: src }, cache)
    const copy = join(dir, 'pass.bin')
    writeFileSync(copy, readFileSync(shard.path))
    expect(await prepareDataset({ path: copy }, cache)).toEqual({ path: copy, vocabSize: 256, tokens: 17 })

    const truncated = join(dir, 'truncated.bin')
    writeFileSync(truncated, readFileSync(shard.path).subarray(0, 70))
    await expect(prepareDataset({ path: truncated }, cache)).rejects.toThrow(/truncated\.bin: is 70 bytes but n_tokens 17 needs 98.*\(byte 16\)/)
  })
})

describe('cache', () => {
  it('returns the same shard for the same content and tokenizer without tokenizing again', async () => {
    const file = join(dir, 'cached.txt')
    writeFileSync(file, 'cache me once\n'.repeat(10))
    const first = await prepareDataset({ path: file }, cache)
    const before = statSync(first.path)
    const second = await prepareDataset({ path: file }, cache)
    expect(second).toEqual(first)
    const after = statSync(second.path)
    // A re-tokenization would write a new file and rename it over the old one: a new inode.
    expect(after.ino).toBe(before.ino)
    expect(after.mtimeMs).toBe(before.mtimeMs)

    writeFileSync(file, 'changed content\n'.repeat(10))
    const third = await prepareDataset({ path: file }, cache)
    expect(third.path).not.toBe(first.path)
  })

  it('names a missing file', async () => {
    await expect(prepareDataset({ path: join(dir, 'nope.txt') }, cache)).rejects.toThrow(/nope\.txt: does not exist/)
  })
})
