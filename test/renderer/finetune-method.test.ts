// The Method section's logic: the section a draft stands for (none for full training of everything), per-method
// defaults, toggling experts of the heatmap, Compare's readable rows, and the store measuring, taking the chosen
// experts and sending the measurement with the run.
import { createPinia, setActivePinia } from 'pinia'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'

import { FINETUNE_DEVICES_MESSAGE, OffloadConfigSchema, PlacementConfigSchema, RunConfigSchema } from '../../main/api/config'
import type { ExpertShares, RunSpec } from '../../main/api/contract'
import {
  defaultMethodDraft, finetuneSection, isChosen, methodDraftOf, shareOpacity, toggleExpert, withMethod,
} from '../../renderer/forms/finetune-draft'
import { useFinetuneMethodStore } from '../../renderer/stores/finetune-method'
import { PLAN_DEBOUNCE_MS, useNewRunStore } from '../../renderer/stores/new-run'
import { configDiff } from '../../renderer/views/compare/config-diff'
import { detailOf, fakeClient, planOf, tinyConfig } from './compare-fixtures'

const SHARES: ExpertShares = {
  layers: [0, 1], gate: [[0.4, 0.3, 0.2, 0.1], [0.7, 0.1, 0.1, 0.1]], tokens: [[0.25, 0.25, 0.25, 0.25], [0.5, 0.5, 0, 0]],
  batches: 4, tokensSeen: 512, threshold: 0.6, score: 'gate', experts: { 0: [0, 1], 1: [0] },
}

describe('method draft', () => {
  it('full training of every group is no section; anything else is one, with the method’s defaults', () => {
    const d = defaultMethodDraft()
    expect(finetuneSection(d)).toBeNull()
    expect(finetuneSection({ ...d, train: ['experts', 'router'] })).toEqual({ method: 'full', train: ['router', 'experts'], experts: null })
    const lora = withMethod(d, 'lora')
    expect(finetuneSection(lora)).toEqual({
      method: 'lora', train: [], experts: null, lora: { rank: 16, alpha: 32, dropout: 0, rslora: false, targets: ['attention', 'experts'] },
    })
    const esft = withMethod(d, 'esft')
    expect(finetuneSection(esft)).toEqual({
      method: 'esft', train: ['experts'], experts: null, esft: { threshold: 0.9, score: 'gate', sample_batches: 32, with: 'full' },
    })
    // Every section the draft produces is one the schema takes.
    for (const s of [lora, esft].map(finetuneSection)) expect(RunConfigSchema.safeParse({ ...tinyConfig, finetune: s }).success).toBe(true)
    expect(methodDraftOf(finetuneSection(esft))).toEqual(esft)
  })

  it('toggling an expert of an unlisted layer lists the others', () => {
    expect(toggleExpert(null, 2, 1, 4)).toEqual({ 2: [0, 2, 3] })
    expect(toggleExpert({ 2: [0, 2, 3] }, 2, 1, 4)).toEqual({ 2: [0, 1, 2, 3] })
    expect(toggleExpert({ 0: [1] }, 0, 1, 4)).toEqual({ 0: [] })
    expect(isChosen(null, 0, 3)).toBe(true)
    expect(isChosen({ 0: [1] }, 0, 3)).toBe(false)
    expect(isChosen({ 0: [1] }, 1, 3)).toBe(true)
    expect(shareOpacity(0.2, 0.4)).toBe(0.5)
    expect(shareOpacity(0, 0)).toBe(0)
  })

  it('Compare shows the method readably', () => {
    const esft = RunConfigSchema.parse({ ...tinyConfig, finetune: { method: 'esft', experts: { 0: [1, 3], 1: [] } } })
    const rows = Object.fromEntries(configDiff([RunConfigSchema.parse(tinyConfig), esft]).map((r) => [r.path, r.values]))
    expect(rows['finetune.method']).toEqual(['full', 'esft (full)'])
    expect(rows['finetune.train']).toEqual(['all groups', 'experts'])
    expect(rows['finetune.experts']).toEqual([null, 'L0: 1 3; L1: none'])
    expect(rows['finetune.esft.threshold']).toEqual([null, '0.9'])
  })
})

describe('measuring in New run', () => {
  beforeEach(() => {
    setActivePinia(createPinia())
    vi.useFakeTimers()
  })
  afterEach(() => vi.useRealTimers())

  it('measures with the ESFT settings, takes the chosen experts, and sends the measurement with the run', async () => {
    const fake = fakeClient({
      'presets.list': async () => [{ name: 'tiny', description: 'demo', config: tinyConfig }],
      'planner.plan': async () => planOf(2 ** 20),
      'finetune.measureExperts': async () => SHARES,
      'runs.create': async ({ spec }) => ({ ...detailOf('run-1').summary, name: spec.name }),
    })
    const form = useNewRunStore()
    const method = useFinetuneMethodStore()
    await form.open({}, fake)
    method.setMethod('esft')
    await form.measureExperts()
    expect(method.measureError).toMatch(/choose a data file first/)
    form.setSpecField('dataset.path', '/data/corpus.txt')
    method.setEsft('threshold', 0.6)
    await form.measureExperts()
    const call = fake.calls.find((c) => c.name === 'finetune.measureExperts')!.params as Record<string, unknown>
    expect(call).toMatchObject({ batches: 32, threshold: 0.6, score: 'gate', dataset: { path: '/data/corpus.txt' } })
    expect(method.draft.experts).toEqual({ 0: [0, 1], 1: [0] })
    method.toggleExpertOf(1, 2, 4)
    expect(form.check.config?.finetune?.experts).toEqual({ 0: [0, 1], 1: [0, 2] })
    await vi.advanceTimersByTimeAsync(PLAN_DEBOUNCE_MS + 10)
    const planned = fake.calls.filter((c) => c.name === 'planner.plan').at(-1)!.params as { config: { finetune: unknown } }
    expect(planned.config.finetune).toMatchObject({ method: 'esft', experts: { 0: [0, 1], 1: [0, 2] } })
    await form.start()
    const spec = (fake.calls.find((c) => c.name === 'runs.create')!.params as { spec: RunSpec }).spec
    expect(spec.expertShares).toEqual(SHARES)
    expect(spec.config.finetune?.experts).toEqual({ 0: [0, 1], 1: [0, 2] })
  })

  it('a LoRA error lands on its field', async () => {
    const fake = fakeClient({ 'presets.list': async () => [{ name: 'tiny', description: 'demo', config: tinyConfig }], 'planner.plan': async () => planOf(2 ** 20) })
    const form = useNewRunStore()
    const method = useFinetuneMethodStore()
    await form.open({}, fake)
    method.setMethod('lora')
    method.setLora('rank', 0)
    expect(form.issuesFor('finetune.lora.rank')).toEqual(['must be at least 1'])
    method.setMethod('full')
    expect(form.check.config?.finetune).toBeUndefined()
  })

  it('what the engine refuses with a fine-tune lands on the Method section’s fields; offload is not refused', async () => {
    const offloaded = { ...tinyConfig, offload: OffloadConfigSchema.parse({ mode: 'host', expert_slots: 2 }) }
    const onDevices = { ...tinyConfig, placement: PlacementConfigSchema.parse({ devices: 2 }) }
    const fake = fakeClient({
      'presets.list': async () => [{ name: 'tiny', description: 'demo', config: onDevices }, { name: 'offloaded', description: 'demo', config: offloaded }],
      'planner.plan': async () => planOf(2 ** 20),
    })
    const form = useNewRunStore()
    const method = useFinetuneMethodStore()
    await form.open({}, fake)
    expect(form.issuesFor('finetune')).toEqual([])
    method.setMethod('lora')
    expect(form.issuesFor('finetune')).toEqual([FINETUNE_DEVICES_MESSAGE])
    method.setMethod('full')
    expect(form.issuesFor('finetune')).toEqual([])
    form.applyPreset('offloaded')
    method.setMethod('lora')
    expect(form.issuesFor('finetune')).toEqual([])
  })

  it('asks the planner to count the frozen base as bf16 when told to', async () => {
    const fake = fakeClient({ 'presets.list': async () => [{ name: 'tiny', description: 'demo', config: tinyConfig }], 'planner.plan': async () => planOf(2 ** 20) })
    const form = useNewRunStore()
    const method = useFinetuneMethodStore()
    await form.open({}, fake)
    method.setMethod('lora')
    await vi.advanceTimersByTimeAsync(PLAN_DEBOUNCE_MS + 10)
    const plans = () => fake.calls.filter((c) => c.name === 'planner.plan').map((c) => (c.params as { frozenBf16?: boolean }).frozenBf16)
    expect(plans().at(-1)).toBeUndefined()
    method.frozenBf16 = true
    await vi.advanceTimersByTimeAsync(PLAN_DEBOUNCE_MS + 10)
    expect(plans().at(-1)).toBe(true)
  })
})
