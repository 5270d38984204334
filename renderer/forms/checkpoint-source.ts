// Which of our runs wrote a checkpoint directory, so a fine-tune can take the model section from
// that run's config (the weights fix the shapes). A checkpoint lives under runsDir/<run id>/, so only
// runs whose id is a segment of the path are read.
import type { RunConfig } from '../../main/api/config'
import type { ApiClient } from '../api'

export interface CheckpointSource {
  runId: string
  runName: string
  step: number
  config: RunConfig
}

const trimSlashes = (path: string) => path.replace(/[\\/]+$/, '')

export async function findCheckpointSource(client: ApiClient, checkpointDir: string): Promise<CheckpointSource | null> {
  const wanted = trimSlashes(checkpointDir)
  const segments = new Set(wanted.split(/[\\/]/))
  const candidates = (await client.invoke('runs.list', {})).filter((run) => segments.has(run.id))
  for (const run of candidates) {
    const detail = await client.invoke('runs.get', { id: run.id })
    const checkpoint = detail.checkpoints.find((c) => trimSlashes(c.path) === wanted)
    if (checkpoint) return { runId: run.id, runName: run.name, step: checkpoint.step, config: detail.config }
  }
  return null
}

/** A Hugging Face model folder the engine can import: its label and its model section (models.inspect). */
export interface ModelFolderSource {
  label: string
  model: RunConfig['model']
}

export async function findModelFolder(client: ApiClient, dir: string): Promise<ModelFolderSource | null> {
  try {
    const card = await client.invoke('models.inspect', { dir })
    return card.model ? { label: card.label ?? card.modelType, model: card.model } : null
  } catch {
    return null
  }
}
