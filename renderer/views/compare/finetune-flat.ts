// The finetune section as Compare's rows: the method with every per-method default filled in (resolveFinetune),
// lists and the per-layer expert sets written out readably. No section reads as full training of everything.
import type { RunConfig } from '../../../main/api/config'
import { FINETUNE_GROUPS, resolveFinetune } from '../../../main/api/finetune'

export function expertsText(experts: Record<string, number[]> | null): string {
  if (!experts) return 'all'
  const layers = Object.keys(experts).sort((a, b) => Number(a) - Number(b))
  return layers.length === 0 ? 'all' : layers.map((l) => `L${l}: ${experts[l]!.length ? experts[l]!.join(' ') : 'none'}`).join('; ')
}

export function flattenFinetune(config: RunConfig): Record<string, string> {
  const f = resolveFinetune(config.finetune)
  if (!f) return { 'finetune.method': 'full', 'finetune.train': 'all groups' }
  const flat: Record<string, string> = {
    'finetune.method': f.method === 'esft' ? `esft (${f.esft!.with})` : f.method,
    'finetune.train': f.train.length === FINETUNE_GROUPS.length ? 'all groups' : f.train.length ? f.train.join(', ') : 'none (frozen base)',
    'finetune.experts': expertsText(f.experts),
  }
  if (f.lora) {
    flat['finetune.lora.rank'] = String(f.lora.rank)
    flat['finetune.lora.alpha'] = String(f.lora.alpha)
    flat['finetune.lora.dropout'] = String(f.lora.dropout)
    flat['finetune.lora.rslora'] = String(f.lora.rslora)
    flat['finetune.lora.targets'] = f.lora.targets.join(', ')
  }
  if (f.esft) {
    flat['finetune.esft.threshold'] = String(f.esft.threshold)
    flat['finetune.esft.score'] = f.esft.score
    flat['finetune.esft.sample_batches'] = String(f.esft.sample_batches)
  }
  return flat
}
