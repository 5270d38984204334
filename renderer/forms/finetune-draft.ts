// The Method section's working copy of the config's finetune section, and the pure steps on it: the section it
// stands for (full training of every group is no section at all, so such a config stays as it always was), the
// defaults a method starts from, toggling an expert of the ESFT heatmap, and a share's cell colour.
import {
  FINETUNE_GROUPS, LORA_TARGETS, type FinetuneConfig, type FinetuneGroup, type FinetuneMethod, type LoraTarget,
} from '../../main/api/finetune'

export interface MethodDraft {
  method: FinetuneMethod
  train: FinetuneGroup[]
  /** Per model layer index, the experts touched; null: all of every layer. */
  experts: Record<string, number[]> | null
  lora: { rank: number; alpha: number; dropout: number; rslora: boolean; targets: LoraTarget[] }
  esft: { threshold: number; score: 'gate' | 'tokens'; sample_batches: number; with: 'full' | 'lora' }
}

export { FINETUNE_GROUPS, LORA_TARGETS }

/** The groups a method trains by default (the contract's rule). */
export function defaultTrain(method: FinetuneMethod, esftWith: 'full' | 'lora'): FinetuneGroup[] {
  if (method === 'full') return [...FINETUNE_GROUPS]
  return method === 'esft' && esftWith === 'full' ? ['experts'] : []
}

export function defaultTargets(method: FinetuneMethod): LoraTarget[] {
  return method === 'esft' ? ['experts'] : ['attention', 'experts']
}

export function defaultMethodDraft(): MethodDraft {
  return {
    method: 'full',
    train: [...FINETUNE_GROUPS],
    experts: null,
    lora: { rank: 16, alpha: 32, dropout: 0, rslora: false, targets: defaultTargets('lora') },
    esft: { threshold: 0.9, score: 'gate', sample_batches: 32, with: 'full' },
  }
}

/**
 * A draft switched to `method`: its trainable groups and LoRA targets back to that method's defaults; the expert
 * set is ESFT's choice, so another method starts from every expert again.
 */
export function withMethod(d: MethodDraft, method: FinetuneMethod): MethodDraft {
  return {
    ...d, method, train: defaultTrain(method, d.esft.with), lora: { ...d.lora, targets: defaultTargets(method) },
    experts: method === 'esft' ? d.experts : null,
  }
}

export const usesLora = (d: MethodDraft) => d.method === 'lora' || (d.method === 'esft' && d.esft.with === 'lora')

/** The config section the draft stands for; null for full training of every group (the config as before). */
export function finetuneSection(d: MethodDraft): FinetuneConfig | null {
  if (d.method === 'full' && d.train.length === FINETUNE_GROUPS.length && d.experts === null) return null
  const ordered = FINETUNE_GROUPS.filter((g) => d.train.includes(g))
  return {
    method: d.method,
    train: ordered,
    experts: d.experts,
    ...(usesLora(d) ? { lora: { ...d.lora, targets: LORA_TARGETS.filter((t) => d.lora.targets.includes(t)) } } : {}),
    ...(d.method === 'esft' ? { esft: { ...d.esft } } : {}),
  }
}

/** The draft of a config's section (null: full training of everything). */
export function methodDraftOf(f: FinetuneConfig | null | undefined): MethodDraft {
  const d = defaultMethodDraft()
  if (!f) return d
  const esft = { ...d.esft, ...f.esft }
  return {
    method: f.method,
    train: f.train ?? defaultTrain(f.method, esft.with),
    experts: f.experts ?? null,
    lora: { ...d.lora, ...f.lora, targets: f.lora?.targets ?? defaultTargets(f.method) },
    esft,
  }
}

/** `list` with `item` added or removed. */
export function toggled<T>(list: readonly T[], item: T): T[] {
  return list.includes(item) ? list.filter((x) => x !== item) : [...list, item]
}

/**
 * finetune.experts with expert `e` of model layer `layer` (of `count` experts) switched: a layer not listed
 * stands for all of its experts, so switching one of them lists the others.
 */
export function toggleExpert(experts: Record<string, number[]> | null, layer: number, e: number, count: number): Record<string, number[]> {
  const key = String(layer)
  const current = experts?.[key] ?? Array.from({ length: count }, (_, i) => i)
  const next = toggled(current, e).sort((a, b) => a - b)
  return { ...experts, [key]: next }
}

export function isChosen(experts: Record<string, number[]> | null, layer: number, e: number): boolean {
  const listed = experts?.[String(layer)]
  return listed === undefined || listed.includes(e)
}

/** A heatmap cell's background: the share relative to the layer's largest, as the accent colour's opacity. */
export function shareOpacity(share: number, layerMax: number): number {
  return layerMax > 0 ? Math.round((share / layerMax) * 100) / 100 : 0
}
