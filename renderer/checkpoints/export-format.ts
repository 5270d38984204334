// What a checkpoint export writes: the merged model (every weight, a LoRA run's adapters merged into theirs) or a
// LoRA run's PEFT adapter. A run that trains adapters exports its adapter by default; a run without adapters has
// nothing to write as one (the host refuses it by name), so the choice is offered only where it applies. The model
// type defaults to that of the Hugging Face folder the run started from.
import type { RunConfig } from '../../main/api/config'
import type { ExportFormat } from '../../main/api/contract'
import { usesLora } from '../../main/api/finetune'
import { HF_MODEL_TYPE_NAMES, type HfModelType } from '../../main/api/model-families'
import type { ApiClient } from '../api'

export const runHasAdapters = (config: RunConfig | null | undefined): boolean => !!config?.finetune && usesLora(config.finetune)

export const defaultExportFormat = (config: RunConfig | null | undefined): ExportFormat =>
  runHasAdapters(config) ? 'adapter' : 'merged'

export const EXPORT_FORMAT_LABELS: Record<ExportFormat, string> = {
  merged: 'merged model',
  adapter: 'PEFT adapter',
}

/** The export's done message: where it went and what is there. */
export function exportedMessage(dir: string, format: ExportFormat): string {
  return format === 'adapter'
    ? `Exported to ${dir}: the PEFT adapter (adapter_config.json, adapter_model.safetensors); load it over the base model`
    : `Exported to ${dir}: the merged model (config.json, safetensors weights)`
}

/** The Hugging Face model type of the folder a run started from, or null (no folder, not HF, not one we write). */
export async function initModelType(client: ApiClient, init: string): Promise<HfModelType | null> {
  try {
    const card = await client.invoke('models.inspect', { dir: init })
    return (HF_MODEL_TYPE_NAMES as readonly string[]).includes(card.modelType) ? (card.modelType as HfModelType) : null
  } catch {
    return null // our own checkpoint directory, or a folder gone since: the form keeps its default
  }
}
