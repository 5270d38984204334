import { describe, expect, it, vi } from 'vitest'

import { ApiInputError, type RunSummary } from '../../main/api/contract'
import { dispatch } from '../../main/api/dispatch'
import { checkedSink } from '../../main/api/event-check'
import { fakeHandlers, summary, tinyWith, validParams } from './contract-fixtures'

describe('dispatch', () => {
  it('passes parsed params (defaults applied) to the handler and returns the checked result', async () => {
    const handlers = fakeHandlers()
    const reply = await dispatch(handlers, 'metrics.series', { id: 'run-1', metrics: ['loss'] })
    expect(reply).toEqual({ result: { step: [1, 2], wallTime: [10, 20], values: { loss: [1, 2] } } })
    expect(handlers.calls).toEqual([{ name: 'metrics.series', params: { id: 'run-1', metrics: ['loss'], maxPoints: 2000 } }])
  })

  it('refuses bad params with field paths, without calling the handler', async () => {
    const handlers = fakeHandlers()
    const reply = await dispatch(handlers, 'runs.create', {
      spec: { ...validParams['runs.create'].spec, config: tinyWith('model', 'top_k', 9) },
    })
    expect(reply).toMatchObject({ error: { code: 'invalid-params', issues: [{ path: 'spec.config.model.top_k' }] } })
    expect(handlers.calls).toEqual([])
  })

  it.each(['runs.explode', 'constructor', '__proto__', 'toString', 42, undefined])('refuses unknown request %j', async (method) => {
    const reply = await dispatch(fakeHandlers(), method, {})
    expect(reply).toMatchObject({ error: { code: 'unknown-method' } })
  })

  it('refuses a malformed result from the host, naming the bad field', async () => {
    const handlers = fakeHandlers({
      'runs.list': async () => [{ ...summary(), status: 'exploded' } as unknown as RunSummary],
    })
    const reply = await dispatch(handlers, 'runs.list', {})
    expect(reply).toMatchObject({ error: { code: 'invalid-result', issues: [{ path: '0.status' }] } })
  })

  it('keeps the field paths of input errors the host raises after the contract check', async () => {
    const handlers = fakeHandlers({
      'runs.create': async () => {
        throw new ApiInputError('runs.create', [{ path: 'spec.dataset.path', message: 'no such file' }])
      },
    })
    const reply = await dispatch(handlers, 'runs.create', validParams['runs.create'])
    expect(reply).toEqual({
      error: { code: 'invalid-params', message: 'runs.create: spec.dataset.path: no such file', issues: [{ path: 'spec.dataset.path', message: 'no such file' }] },
    })
  })

  it('reports other handler failures by message only', async () => {
    const handlers = fakeHandlers({
      'runs.stop': async () => {
        throw new Error('run run-1 is not running')
      },
    })
    const reply = await dispatch(handlers, 'runs.stop', { id: 'run-1' })
    expect(reply).toEqual({ error: { code: 'failed', message: 'run run-1 is not running', issues: [] } })
  })

  it('answers with plain data that survives structured cloning and JSON', async () => {
    const reply = await dispatch(fakeHandlers(), 'runs.get', { id: 'run-1' })
    expect(structuredClone(reply)).toEqual(reply)
    expect(JSON.parse(JSON.stringify(reply))).toEqual(reply)
  })
})

describe('checkedSink', () => {
  it('delivers valid events and rejects malformed ones with their paths', () => {
    const deliver = vi.fn()
    const reject = vi.fn()
    const sink = checkedSink(deliver, reject)
    sink('run.status', summary())
    sink('run.status', { ...summary(), step: 'ten' } as unknown as RunSummary)
    expect(deliver).toHaveBeenCalledExactlyOnceWith('run.status', summary())
    expect(reject).toHaveBeenCalledExactlyOnceWith('run.status', [expect.objectContaining({ path: 'step' })])
  })
})

describe('dispatch results', () => {
  it('strips fields the contract does not describe', async () => {
    const handlers = fakeHandlers({
      'runs.list': async () => [{ ...summary(), internalPath: '/home/me/.moe-workbench/runs/run-1' } as RunSummary],
    })
    const reply = await dispatch(handlers, 'runs.list', {})
    expect(reply).toEqual({ result: [summary()] })
  })
})
