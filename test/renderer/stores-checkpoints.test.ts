// Checkpoints, hardware and the global notice stores against a fake host.
import { createPinia, setActivePinia } from 'pinia'
import { beforeEach, describe, expect, it } from 'vitest'

import { ApiError } from '../../renderer/api'
import { RunConfigSchema } from '../../main/api/config'
import { defaultExportFormat, exportedMessage, initModelType, runHasAdapters } from '../../renderer/checkpoints/export-format'
import { useCheckpointsStore } from '../../renderer/stores/checkpoints'
import { useHardwareStore } from '../../renderer/stores/hardware'
import { adviceFor, useNoticesStore } from '../../renderer/stores/notices'
import { fakeClient } from './stores-fake-client'

beforeEach(() => setActivePinia(createPinia()))

const checkpoint = (step: number) => ({ runId: 'run-1', step, path: `/data/runs/run-1/ckpt-${step}`, createdAt: step, bytes: 1000 * step })

describe('checkpoints store', () => {
  it('lists a run’s checkpoints newest first', async () => {
    const client = fakeClient()
    const base = client.handlers['runs.get']
    client.handlers['runs.get'] = async (p) => ({ ...(await base(p)), checkpoints: [checkpoint(10), checkpoint(30), checkpoint(20)] })
    const store = useCheckpointsStore()
    await store.load('run-1', client)
    expect(store.newestFirst.map((c) => c.step)).toEqual([30, 20, 10])
    expect(store.summary?.id).toBe('run-1')
    expect(store.config?.model.arch).toBeTruthy()
  })

  it('tracks an export from running to the written directory', async () => {
    let finish: (dir: string) => void = () => undefined
    const client = fakeClient({ 'checkpoints.export': () => new Promise((resolve) => (finish = (dir) => resolve({ dir }))) })
    const store = useCheckpointsStore()
    const exporting = store.exportCheckpoint({ id: 'run-1', step: 20, dir: '/tmp/out', modelType: 'qwen2_moe', dtype: 'bf16' }, client)
    expect(store.exportState('run-1', 20)).toEqual({ state: 'running', dir: '/tmp/out', format: 'merged' })
    await Promise.resolve()
    finish('/tmp/out/hf')
    await expect(exporting).resolves.toBe('/tmp/out/hf')
    expect(store.exportState('run-1', 20)).toEqual({ state: 'done', dir: '/tmp/out/hf', format: 'merged' })
    expect(client.calls('checkpoints.export')[0]).toEqual({ id: 'run-1', step: 20, dir: '/tmp/out', modelType: 'qwen2_moe', dtype: 'bf16', format: 'merged' })
  })

  it('exports a LoRA run’s checkpoint as a PEFT adapter, and says what went where', async () => {
    const client = fakeClient({ 'checkpoints.export': async (p: { dir: string }) => ({ dir: p.dir }) })
    const store = useCheckpointsStore()
    await store.exportCheckpoint({ id: 'run-1', step: 20, dir: '/tmp/adapter', format: 'adapter' }, client)
    expect(client.calls('checkpoints.export')[0]).toMatchObject({ format: 'adapter' })
    const done = store.exportState('run-1', 20)
    expect(done).toEqual({ state: 'done', dir: '/tmp/adapter', format: 'adapter' })
    expect(exportedMessage('/tmp/adapter', 'adapter')).toBe(
      'Exported to /tmp/adapter: the PEFT adapter (adapter_config.json, adapter_model.safetensors); load it over the base model')
    expect(exportedMessage('/tmp/hf', 'merged')).toBe('Exported to /tmp/hf: the merged model (config.json, safetensors weights)')
  })

  it('a LoRA run defaults to the adapter; runs without adapters export merged only', () => {
    const model = { arch: 'mixtral', vocab_size: 16, d_model: 8, n_layers: 2, n_heads: 2, n_kv_heads: 1, max_seq_len: 8, d_ff: 4, n_experts: 4, top_k: 2 }
    const config = (finetune: unknown) => RunConfigSchema.parse({ model, train: { batch_size: 1, seq_len: 8 }, finetune })
    expect(defaultExportFormat(config({ method: 'lora', lora: {} }))).toBe('adapter')
    expect(defaultExportFormat(config({ method: 'esft', experts: { 0: [1] }, esft: { with: 'lora' }, lora: {} }))).toBe('adapter')
    for (const c of [config(undefined), config({ method: 'full' }), config({ method: 'esft', experts: { 0: [1] } }), null]) {
      expect(defaultExportFormat(c)).toBe('merged')
      expect(runHasAdapters(c)).toBe(false)
    }
  })

  it('defaults the export’s model type to that of the Hugging Face folder the run started from', async () => {
    const card = (modelType: string) => async () => ({ modelType }) as never
    expect(await initModelType(fakeClient({ 'models.inspect': card('qwen3_moe') }), '/models/qwen3')).toBe('qwen3_moe')
    expect(await initModelType(fakeClient({ 'models.inspect': card('llama') }), '/models/llama')).toBeNull()
    const notHf = fakeClient({ 'models.inspect': async () => Promise.reject(new Error('no config.json')) })
    expect(await initModelType(notHf, '/runs/x/checkpoint-4')).toBeNull()
  })

  it('keeps a failed export’s message', async () => {
    const client = fakeClient({ 'checkpoints.export': async () => Promise.reject(new Error('EACCES: /root')) })
    const store = useCheckpointsStore()
    await expect(store.exportCheckpoint({ id: 'run-1', dir: '/root' }, client)).rejects.toThrow()
    expect(store.exportState('run-1', undefined)).toEqual({ state: 'failed', message: 'EACCES: /root' })
  })
})

describe('hardware store', () => {
  it('probes the machine and keeps a failure readable', async () => {
    const store = useHardwareStore()
    await store.probe(fakeClient())
    expect(store.hardware).toMatchObject({ cpuModel: 'test cpu', gpus: [], backends: ['cpu'] })
    await store.probe(fakeClient({ 'hardware.probe': async () => Promise.reject(new Error('statfs failed')) }))
    expect(store.error).toBe('statfs failed')
  })
})

describe('notices store', () => {
  it('reports a failure with the host’s words and what to do, keeping the latest three', async () => {
    const notices = useNoticesStore()
    const failure = new ApiError('runs.stop', { code: 'invalid-params', message: 'bad', issues: [{ path: 'id', message: 'a run id' }] })
    expect(await notices.attempt('Could not stop', async () => Promise.reject(failure))).toBeUndefined()
    expect(notices.notices[0]).toMatchObject({ title: 'Could not stop', detail: 'id: a run id', advice: adviceFor(failure) })
    for (let i = 0; i < 4; i++) notices.report(`n${i}`, new Error('x'))
    expect(notices.notices.map((n) => n.title)).toEqual(['n1', 'n2', 'n3'])
    notices.dismiss(notices.notices[0]!.id)
    expect(notices.notices).toHaveLength(2)
    expect(await notices.attempt('fine', async () => 7)).toBe(7)
  })

  it('advises by error kind', () => {
    expect(adviceFor(new ApiError('x', { code: 'disconnected', message: '', issues: [] }))).toMatch(/reconnects/)
    expect(adviceFor(new Error('?'))).toMatch(/reload/)
  })
})
