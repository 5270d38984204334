// Which weights answer a Try-it prompt and which tokenizer reads it: a model folder (Hugging Face or one of our
// checkpoints) with its own tokenizer.json, or a run — its base (the init it started from) or one of its
// checkpoints — with the run's tokenizer (its dataset's, else its init folder's). No tokenizer: bytes.
import { existsSync } from 'node:fs'
import { join } from 'node:path'

import type { ChatModel } from '../../api/contract'
import { pickCheckpoint } from '../handlers'
import type { TelemetryStore } from '../store/store'

export interface ChatModelChoice {
  modelDir: string
  label: string
  tokenizerFile: string | null
}

const tokenizerIn = (dir: string): string | null => (existsSync(join(dir, 'tokenizer.json')) ? join(dir, 'tokenizer.json') : null)

export function resolveChatModel(store: TelemetryStore, model: ChatModel, tokenizer?: string): ChatModelChoice {
  if ('dir' in model) {
    if (!existsSync(join(model.dir, 'config.json')))
      throw new Error(`${model.dir}: no config.json; choose a Hugging Face model folder or a checkpoint directory`)
    return { modelDir: model.dir, label: model.dir, tokenizerFile: tokenizer ?? tokenizerIn(model.dir) }
  }
  const run = store.getRun(model.runId)
  if (!run) throw new Error(`no run "${model.runId}"`)
  const tokenizerFile = tokenizer ?? run.dataset.tokenizer ?? (run.init ? tokenizerIn(run.init) : null)
  if (model.checkpoint === 'base') {
    if (!run.init)
      throw new Error(`run "${run.id}" started from random weights (no init), so it has no base model to answer; pick one of its checkpoints`)
    return { modelDir: run.init, label: `base of run ${run.id} (${run.init})`, tokenizerFile }
  }
  const checkpoint = pickCheckpoint(store, run.id, model.checkpoint === 'latest' ? undefined : model.checkpoint)
  return { modelDir: checkpoint.path, label: `run ${run.id} step ${checkpoint.step}`, tokenizerFile }
}
