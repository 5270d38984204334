// The New-run form's Method section: the finetune draft, its ESFT measurement (the layer × expert shares, stored
// with the run when it starts) and the measuring request.
import { defineStore } from 'pinia'
import { computed, ref } from 'vue'

import type { RunConfig } from '../../main/api/config'
import type { ExpertShares, RunSpec } from '../../main/api/contract'
import type { FinetuneGroup, FinetuneMethod, LoraTarget } from '../../main/api/finetune'
import type { ApiClient } from '../api'
import {
  defaultMethodDraft, finetuneSection, methodDraftOf, toggleExpert, toggled, withMethod, type MethodDraft,
} from '../forms/finetune-draft'

const message = (failure: unknown) => (failure instanceof Error ? failure.message : String(failure))

export const useFinetuneMethodStore = defineStore('finetune-method', () => {
  const draft = ref<MethodDraft>(defaultMethodDraft())
  const shares = ref<ExpertShares | null>(null)
  const measuring = ref(false)
  const measureError = ref<string | null>(null)
  /** The planner counts the frozen base as bf16 (it honours this with train.compute_dtype bf16 only). */
  const frozenBf16 = ref(false)

  const section = computed(() => finetuneSection(draft.value))

  function reset(config?: Pick<RunConfig, 'finetune'>): void {
    draft.value = methodDraftOf(config?.finetune)
    shares.value = null
    measureError.value = null
  }
  function setMethod(method: FinetuneMethod): void {
    draft.value = withMethod(draft.value, method)
    // Back to ESFT after measuring: its chosen experts again.
    if (method === 'esft' && draft.value.experts === null && shares.value) draft.value = { ...draft.value, experts: shares.value.experts }
  }
  function toggleGroup(group: FinetuneGroup): void {
    draft.value = { ...draft.value, train: toggled(draft.value.train, group) }
  }
  function toggleTarget(target: LoraTarget): void {
    draft.value = { ...draft.value, lora: { ...draft.value.lora, targets: toggled(draft.value.lora.targets, target) } }
  }
  function setLora<K extends keyof MethodDraft['lora']>(key: K, value: MethodDraft['lora'][K]): void {
    draft.value = { ...draft.value, lora: { ...draft.value.lora, [key]: value } }
  }
  function setEsft<K extends keyof MethodDraft['esft']>(key: K, value: MethodDraft['esft'][K]): void {
    const esft = { ...draft.value.esft, [key]: value }
    // Switching how the chosen experts train switches the default groups and targets with it.
    draft.value = key === 'with' ? withMethod({ ...draft.value, esft }, draft.value.method) : { ...draft.value, esft }
  }
  function toggleExpertOf(layer: number, e: number, count: number): void {
    draft.value = { ...draft.value, experts: toggleExpert(draft.value.experts, layer, e, count) }
  }

  /** Runs the engine over the data's first batches and takes its chosen experts as finetune.experts. */
  async function measure(client: ApiClient, config: RunConfig, dataset: RunSpec['dataset'], init?: string): Promise<void> {
    measuring.value = true
    measureError.value = null
    try {
      const { threshold, score, sample_batches: batches } = draft.value.esft
      const result = await client.invoke('finetune.measureExperts', {
        config, dataset, ...(init ? { init } : {}), batches, threshold, score,
      })
      shares.value = result
      draft.value = { ...draft.value, experts: result.experts }
    } catch (failure) {
      measureError.value = message(failure)
    } finally {
      measuring.value = false
    }
  }

  return {
    draft, shares, measuring, measureError, section, frozenBf16,
    reset, setMethod, toggleGroup, toggleTarget, setLora, setEsft, toggleExpertOf, measure,
  }
})
