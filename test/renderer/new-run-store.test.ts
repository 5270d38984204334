// The New-run store against a fake client: presets, the debounced planner, Start, server issues on
// their fields, checkpoints fixing the model, and queuing an ablation set.
import { createPinia, setActivePinia } from 'pinia'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'

import type { RunSpec } from '../../main/api/contract'
import { ApiError } from '../../renderer/api'
import { sweepRuns } from '../../renderer/forms/ablation'
import { allFields } from '../../renderer/forms/schema-fields'
import { PLAN_DEBOUNCE_MS, useNewRunStore } from '../../renderer/stores/new-run'
import { detailOf, fakeClient, planOf, tinyConfig } from './compare-fixtures'

const field = (path: string) => allFields().find((f) => f.path === path)!
const summaryOf = (id: string) => detailOf(id).summary

function client(extra: Parameters<typeof fakeClient>[0] = {}) {
  let created = 0
  return fakeClient({
    'presets.list': async () => [{ name: 'tiny', description: 'demo', config: tinyConfig }],
    'planner.plan': async () => planOf(2 ** 20),
    'runs.create': async ({ spec }) => ({ ...summaryOf(`run-${++created}`), name: spec.name }),
    ...extra,
  })
}

beforeEach(() => {
  setActivePinia(createPinia())
  vi.useFakeTimers()
})
afterEach(() => vi.useRealTimers())

describe('new run store', () => {
  it('opens on the first preset and plans it once after the debounce', async () => {
    const fake = client()
    const form = useNewRunStore()
    await form.open({}, fake)
    expect(form.name).toBe('tiny')
    expect(form.draft.model['d_model']).toBe(64)
    form.setField(field('model.top_k'), 1)
    form.setField(field('model.top_k'), 2)
    await vi.advanceTimersByTimeAsync(PLAN_DEBOUNCE_MS + 10)
    const plans = fake.calls.filter((c) => c.name === 'planner.plan')
    expect(plans).toHaveLength(1)
    expect((plans[0]!.params as { config: { model: { top_k: number } } }).config.model.top_k).toBe(2)
    expect(form.plan?.fits).toBe(true)
    expect(form.planPending).toBe(false)
  })

  it('places an issue of a nested section on its own field', async () => {
    const form = useNewRunStore()
    await form.open({}, client())
    form.setField(field('model.router'), { scoring: 'softmax', selection: 'group_limited', n_group: 2, topk_group: 3 })
    expect(form.issuesFor('model.router.topk_group')).toEqual(['exceeds n_group (2)'])
    expect(form.issuesFor('model.router')).toEqual([])
  })

  it('takes the model section of a Hugging Face folder that is not a run’s checkpoint', async () => {
    const form = useNewRunStore()
    const model = { ...tinyConfig.model, n_layers: 5, top_k: 1 }
    await form.open({ init: '/models/qwen3' }, client({
      'runs.list': async () => [],
      'models.inspect': async ({ dir }) => ({ dir, modelType: 'qwen3_moe', label: 'Qwen3-MoE', model }) as never,
    }))
    expect(form.source).toMatchObject({ kind: 'checkpoint', path: '/models/qwen3', from: null, model: 'Qwen3-MoE' })
    expect(form.draft.model).toMatchObject({ n_layers: 5, top_k: 1 })
    expect(form.name).toBe('Qwen3-MoE fine-tune')
  })

  it('does not plan an invalid config, and names the field at fault', async () => {
    const fake = client()
    const form = useNewRunStore()
    await form.open({}, fake)
    await vi.advanceTimersByTimeAsync(PLAN_DEBOUNCE_MS + 10)
    const before = fake.calls.length
    form.setField(field('model.top_k'), 9)
    await vi.advanceTimersByTimeAsync(PLAN_DEBOUNCE_MS + 10)
    expect(fake.calls.length).toBe(before)
    expect(form.issuesFor('model.top_k')).toEqual(['exceeds the experts of a layer'])
    expect(form.canStart).toBe(false)
  })

  it('asks for a name and a data file on Start, then creates the run', async () => {
    const fake = client()
    const form = useNewRunStore()
    await form.open({}, fake)
    form.setSpecField('name', '')
    expect(await form.start()).toBeNull()
    expect(form.issuesFor('name')).toEqual(['give the run a name'])
    expect(form.issuesFor('dataset.path')).toHaveLength(1)
    form.setSpecField('name', 'my run')
    form.setSpecField('dataset.path', '/data/corpus.txt')
    expect(await form.start()).toBe('run-1')
    const spec = (fake.calls.find((c) => c.name === 'runs.create')!.params as { spec: RunSpec }).spec
    expect(spec).toMatchObject({ name: 'my run', dataset: { path: '/data/corpus.txt' } })
    expect(spec).not.toHaveProperty('init')
    expect(spec.config.train.steps).toBe(20)
  })

  it('puts the host’s issues next to their fields, and clears one when its field changes', async () => {
    const refusal = new ApiError('runs.create', {
      code: 'invalid-params',
      message: 'bad input',
      issues: [
        { path: 'spec.config.model.vocab_size', message: 'set it to at least 300' },
        { path: 'spec.dataset.tokenizer', message: 'not a tokenizer.json' },
      ],
    })
    const form = useNewRunStore()
    await form.open({}, client({ 'runs.create': async () => Promise.reject(refusal) }))
    form.setSpecField('dataset.path', '/data/corpus.txt')
    expect(await form.start()).toBeNull()
    expect(form.issuesFor('model.vocab_size')).toEqual(['set it to at least 300'])
    expect(form.issuesFor('dataset.tokenizer')).toEqual(['not a tokenizer.json'])
    form.setField(field('model.vocab_size'), 300)
    expect(form.issuesFor('model.vocab_size')).toEqual([])
    expect(form.issuesFor('dataset.tokenizer')).toHaveLength(1)
  })

  it('takes the model from the run whose checkpoint ?init names', async () => {
    const source = detailOf('tiny-a1', { name: 'tiny a' }, { ...tinyConfig, model: { ...tinyConfig.model, n_experts: 6 } })
    source.checkpoints = [{ runId: 'tiny-a1', step: 10, path: '/home/u/runs/tiny-a1/step-10', createdAt: 0, bytes: 1 }]
    const fake = client({
      'runs.list': async () => [source.summary, summaryOf('other')],
      'runs.get': async ({ id }) => (id === 'tiny-a1' ? source : detailOf(id)),
    })
    const form = useNewRunStore()
    await form.open({ init: '/home/u/runs/tiny-a1/step-10/' }, fake)
    expect(form.modelFromCheckpoint).toBe(true)
    expect(form.source).toMatchObject({ kind: 'checkpoint', from: { runId: 'tiny-a1', step: 10 } })
    expect(form.draft.model['n_experts']).toBe(6)
    expect(form.name).toBe('tiny a fine-tune')
    expect(fake.calls.filter((c) => c.name === 'runs.get').map((c) => c.params)).toEqual([{ id: 'tiny-a1' }])
    form.setSpecField('dataset.path', '/data/corpus.txt')
    await form.start()
    const spec = (fake.calls.find((c) => c.name === 'runs.create')!.params as { spec: RunSpec }).spec
    expect(spec.init).toBe('/home/u/runs/tiny-a1/step-10/')
  })

  it('keeps the model editable for a checkpoint of no known run', async () => {
    const form = useNewRunStore()
    await form.open({ init: '/models/olmoe' }, client({ 'runs.list': async () => [summaryOf('x')] }))
    expect(form.source).toMatchObject({ kind: 'checkpoint', path: '/models/olmoe', from: null, looking: false })
    expect(form.modelFromCheckpoint).toBe(false)
  })

  it('queues a sweep one runs.create each, in order, and returns the ids', async () => {
    const fake = client()
    const form = useNewRunStore()
    await form.open({}, fake)
    form.setSpecField('dataset.path', '/data/corpus.txt')
    const runs = sweepRuns(form.check.config!, 'tiny', field('model.top_k'), [1, 2])
    expect(await form.queue(runs)).toEqual(['run-1', 'run-2'])
    const names = fake.calls.filter((c) => c.name === 'runs.create').map((c) => (c.params as { spec: RunSpec }).spec.name)
    expect(names).toEqual(['tiny · top_k=1', 'tiny · top_k=2'])
  })
})
