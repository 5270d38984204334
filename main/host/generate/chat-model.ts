// Which weights answer a Try-it prompt and which tokenizer reads it: a model folder (Hugging Face or one of our
// checkpoints) with its own tokenizer.json, a PEFT adapter folder on its base (its own tokenizer, else the
// base's), or a run — its base (the init it started from) or one of its checkpoints — with the run's tokenizer
// (its dataset's, else its init folder's). No tokenizer: bytes.
import { existsSync } from 'node:fs'
import { join } from 'node:path'

import type { ChatModel } from '../../api/contract'
import { pickCheckpoint } from '../handlers'
import { adapterBase, onBase } from '../models/adapter-folder'
import type { TelemetryStore } from '../store/store'

export interface ChatModelChoice {
  modelDir: string
  /** modelDir is a PEFT adapter folder: the base model folder it answers on. */
  baseDir?: string
  label: string
  tokenizerFile: string | null
}

const tokenizerIn = (dir: string): string | null => (existsSync(join(dir, 'tokenizer.json')) ? join(dir, 'tokenizer.json') : null)

export function resolveChatModel(store: TelemetryStore, model: ChatModel, tokenizer?: string): ChatModelChoice {
  if ('dir' in model) {
    if (onBase(model.dir, model.base)) {
      // An adapter folder may carry the tokenizer it was trained with; else the base's.
      const baseDir = adapterBase(model.dir, model.base)
      return { modelDir: model.dir, baseDir, label: `${model.dir} on ${baseDir}`,
        tokenizerFile: tokenizer ?? tokenizerIn(model.dir) ?? tokenizerIn(baseDir) }
    }
    if (model.base !== undefined)
      throw new Error(`${model.dir}: no adapter_config.json, so it is no PEFT adapter folder to put on base ${model.base}`)
    if (!existsSync(join(model.dir, 'config.json')))
      throw new Error(`${model.dir}: no config.json; choose a Hugging Face model folder, a checkpoint directory or a PEFT adapter folder`)
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
