// The Try-it conversations in flight: chat.start renders the prompt, starts a generation on a worker thread and
// returns at once; each token goes out as a chat.token event (its text and the experts that made it), and the
// end as one chat.done. chat.cancel ends one early. A conversation with its experts in the SSD tier keeps the
// tier's file in a directory of its own under the scratch directory, removed when the generation ends however it
// ends (a cancelled worker never runs the engine's own clean-up), and left-overs of hosts that died are removed at
// start.
import { randomUUID } from 'node:crypto'
import { mkdirSync, readdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'

import type { ChatStarted, EventSink, ParsedParams } from '../../api/contract'
import { byteTokenizer, loadHfTokenizer, type TextTokenizer } from '../datasets'
import { pidAlive } from '../runs/run-owner'
import type { TelemetryStore } from '../store/store'
import { resolveChatModel } from './chat-model'
import { chatPrompt } from './chat-prompt'
import { runGeneration, type RunningGeneration } from './generation-worker'
import { TextStream } from './text-stream'

export type ChatRequest = ParsedParams<'chat.start'>

export class ChatSessions {
  private readonly running = new Map<string, RunningGeneration>()
  // Tokenizers by file: building a large vocabulary's takes seconds, and a conversation asks again each turn.
  private readonly tokenizers = new Map<string, Promise<TextTokenizer>>()

  // scratchDir: where an SSD-tier conversation's directory goes (absent: the system's temporary directory).
  constructor(
    private readonly store: TelemetryStore,
    private readonly emit: EventSink,
    private readonly scratchDir?: string,
  ) {
    if (scratchDir) removeDeadHostsScratch(scratchDir)
  }

  async start(request: ChatRequest): Promise<ChatStarted> {
    const choice = resolveChatModel(this.store, request.model, request.tokenizer)
    const tokenizer = choice.tokenizerFile ? await this.tokenizer(choice.tokenizerFile) : byteTokenizer
    const prompt = chatPrompt(tokenizer, request.messages)
    const id = `chat-${randomUUID()}`
    const { sampling } = request
    const text = new TextStream((ids) => tokenizer.decode(ids))
    const stops = new Set(prompt.stopTokens)
    let index = 0
    const started = Date.now()
    const ssdDir = request.experts === 'ssd' && this.scratchDir ? join(this.scratchDir, `${process.pid}-${id}`) : undefined
    if (ssdDir) mkdirSync(ssdDir, { recursive: true })
    const generation = runGeneration(
      {
        modelDir: choice.modelDir,
        prompt: prompt.ids,
        stopTokens: prompt.stopTokens,
        maxTokens: sampling.maxTokens,
        config: JSON.stringify({ train: { compute_dtype: request.precision } }),
        options: {
          temperature: sampling.temperature, topK: sampling.topK, topP: sampling.topP, seed: sampling.seed, expertHome: request.experts,
          ...(ssdDir ? { ssdDir } : {}),
          ...(choice.baseDir ? { baseDir: choice.baseDir } : {}),
        },
      },
      (t) => {
        // The end-of-turn token ends the answer; its text is not part of it.
        const added = stops.has(t.token) ? '' : text.push(t.token)
        this.emit('chat.token', { id, index: index++, token: t.token, text: added, layers: t.layers, experts: t.experts })
      },
    )
    this.running.set(id, generation)
    // Removed once the worker has stopped, which a cancelled load may take a while to do.
    if (ssdDir) void generation.exited.then(() => rmSync(ssdDir, { recursive: true, force: true }))
    void generation.done.then((end) => {
      this.running.delete(id)
      const seconds = (Date.now() - started) / 1000
      this.emit('chat.done', {
        id,
        reason: end.reason,
        error: end.reason === 'failed' ? end.error : null,
        tokens: index,
        text: text.text,
        tokensPerSec: index > 0 && seconds > 0 ? index / seconds : null,
      })
    })
    return { id, modelDir: choice.modelDir, label: choice.label, promptTokens: prompt.ids.length, template: prompt.template, stopTokens: prompt.stopTokens }
  }

  private tokenizer(file: string): Promise<TextTokenizer> {
    let loading = this.tokenizers.get(file)
    if (!loading) {
      loading = loadHfTokenizer(file)
      // A failed load is not kept: the file may be fixed before the next try.
      loading.catch(() => this.tokenizers.delete(file))
      this.tokenizers.set(file, loading)
    }
    return loading
  }

  cancel(id: string): void {
    const generation = this.running.get(id)
    if (!generation) throw new Error(`no generation "${id}" is running`)
    generation.cancel()
  }

  /** Ends every generation (host shutdown). */
  cancelAll(): void {
    for (const g of this.running.values()) g.cancel()
  }
}

// A scratch entry is `<pid>-<chat id>`: one whose host process is gone is a left-over of a crash.
function removeDeadHostsScratch(scratchDir: string): void {
  let names: string[]
  try {
    names = readdirSync(scratchDir)
  } catch {
    return
  }
  for (const name of names) {
    const pid = Number(name.split('-')[0])
    if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid || pidAlive(pid)) continue  // not ours, or alive
    rmSync(join(scratchDir, name), { recursive: true, force: true })
  }
}
