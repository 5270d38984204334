import { join } from 'node:path'

import { afterEach, beforeEach, describe, expect, test } from 'vitest'

import { openDatabase } from '../../main/host/store/db'
import { StoreError, TelemetryStore } from '../../main/host/store/store'
import { TINY_CONFIG, runRecord, stepRecords, tempDir, wallTimeOf } from './store-fixtures'

let dir: string
let cleanup: () => void
let path: string
let store: TelemetryStore
beforeEach(() => {
  ;({ dir, cleanup } = tempDir())
  path = join(dir, 'telemetry.sqlite')
  store = TelemetryStore.open(path)
})
afterEach(() => {
  store.close()
  cleanup()
})

// Rows left in a table for a run, read through a second connection.
function rowsOf(table: string, runId: string): number {
  const db = openDatabase(path, { readonly: true })
  try {
    return Number(db.prepare(`SELECT count(*) AS n FROM ${table} WHERE run_id = ?`).get(runId)?.n)
  } finally {
    db.close()
  }
}

function corrupt(sql: string, ...params: string[]): void {
  const db = openDatabase(path)
  db.prepare(sql).run(...params)
  db.close()
}

describe('runs', () => {
  test('a run reads back exactly as inserted', () => {
    const run = runRecord('r1', {
      status: 'failed',
      dataset: { path: '/d/x.jsonl', tokenizer: '/d/tokenizer.json' },
      init: '/ckpt/a',
      startedAt: 1_700_000_001_000,
      finishedAt: 1_700_000_002_000,
      lastLoss: 2.5,
      tokensPerSec: 8000,
      error: 'engine exited with signal 9',
    })
    store.insertRun(run)
    expect(store.getRun('r1')).toEqual(run)
    expect(store.getRun('nope')).toBeUndefined()
  })

  test('listRuns is newest first', () => {
    store.insertRun(runRecord('old', { createdAt: 1000 }))
    store.insertRun(runRecord('new', { createdAt: 3000 }))
    store.insertRun(runRecord('mid', { createdAt: 2000 }))
    expect(store.listRuns().map((r) => r.id)).toEqual(['new', 'mid', 'old'])
  })

  test('updateRun changes only the patched fields', () => {
    store.insertRun(runRecord('r1'))
    const config = { ...TINY_CONFIG, train: { ...TINY_CONFIG.train, steps: 7 } }
    store.updateRun('r1', { status: 'running', startedAt: 1234, config, error: undefined })
    expect(store.getRun('r1')).toEqual({ ...runRecord('r1'), status: 'running', startedAt: 1234, config })
    store.updateRun('r1', { startedAt: null })
    expect(store.getRun('r1')?.startedAt).toBeNull()
  })

  test('invalid input is refused and changes nothing', () => {
    store.insertRun(runRecord('r1'))
    expect(() => store.insertRun(runRecord('r1'))).toThrow('run r1 already exists')
    expect(() => store.insertRun(runRecord('Bad Id'))).toThrow(/run Bad Id: id:/)
    expect(() => store.updateRun('r1', { status: 'exploded' as never })).toThrow(/run r1: status/)
    expect(() => store.updateRun('r1', { config: { ...TINY_CONFIG, model: { ...TINY_CONFIG.model, n_heads: 3 } } }))
      .toThrow(/config\.model\.n_heads: must divide d_model/)
    expect(() => store.updateRun('r1', { bogus: 1 } as never)).toThrow(/run r1/)
    expect(() => store.updateRun('ghost', { status: 'running' })).toThrow(StoreError)
    expect(() => store.updateRun('ghost', {})).toThrow('unknown run "ghost"')
    expect(store.getRun('r1')).toEqual(runRecord('r1'))
    expect(store.listRuns()).toHaveLength(1)
  })

  test('deleteRun removes its steps, expert loads, events and checkpoints, and nothing of other runs', () => {
    for (const id of ['r1', 'r2']) {
      store.insertRun(runRecord(id))
      store.appendSteps(id, stepRecords(1, 5), [1, 2, 3, 4, 5].map(wallTimeOf))
      store.addEvent({ runId: id, at: 1, kind: 'started', message: 'go' })
      store.addCheckpoint({ runId: id, step: 5, path: `/runs/${id}/checkpoint-5`, createdAt: 2, bytes: 10 })
    }
    store.deleteRun('r1')
    expect(store.getRun('r1')).toBeUndefined()
    for (const table of ['steps', 'expert_loads', 'events', 'checkpoints']) {
      expect(rowsOf(table, 'r1'), table).toBe(0)
      expect(rowsOf(table, 'r2'), table).toBeGreaterThan(0)
    }
    expect(store.lastStep('r2')).toBe(5)
    expect(() => store.deleteRun('r1')).toThrow('unknown run "r1"')
  })
})

describe('events and checkpoints', () => {
  beforeEach(() => store.insertRun(runRecord('r1')))

  test('events list in time order', () => {
    store.addEvent({ runId: 'r1', at: 20, kind: 'log', message: 'second' })
    store.addEvent({ runId: 'r1', at: 10, kind: 'queued', message: 'first' })
    store.addEvent({ runId: 'r1', at: 20, kind: 'checkpoint', message: 'third' })
    expect(store.listEvents('r1')).toEqual([
      { runId: 'r1', at: 10, kind: 'queued', message: 'first' },
      { runId: 'r1', at: 20, kind: 'log', message: 'second' },
      { runId: 'r1', at: 20, kind: 'checkpoint', message: 'third' },
    ])
    expect(store.listEvents('other')).toEqual([])
  })

  test('bad events are refused', () => {
    expect(() => store.addEvent({ runId: 'r1', at: 1, kind: 'exploded' as never, message: '' })).toThrow(/kind/)
    expect(() => store.addEvent({ runId: 'ghost', at: 1, kind: 'log', message: '' })).toThrow('unknown run "ghost"')
    expect(store.listEvents('r1')).toEqual([])
  })

  test('checkpoints list by step; re-saving a step replaces its record', () => {
    store.addCheckpoint({ runId: 'r1', step: 200, path: '/c/200', createdAt: 2, bytes: 20 })
    store.addCheckpoint({ runId: 'r1', step: 100, path: '/c/100', createdAt: 1, bytes: 10 })
    store.addCheckpoint({ runId: 'r1', step: 200, path: '/c/200b', createdAt: 3, bytes: 30 })
    expect(store.listCheckpoints('r1')).toEqual([
      { runId: 'r1', step: 100, path: '/c/100', createdAt: 1, bytes: 10 },
      { runId: 'r1', step: 200, path: '/c/200b', createdAt: 3, bytes: 30 },
    ])
    expect(() => store.addCheckpoint({ runId: 'ghost', step: 1, path: '/c', createdAt: 1, bytes: 1 })).toThrow(/unknown run/)
    expect(() => store.addCheckpoint({ runId: 'r1', step: 1.5, path: '/c', createdAt: 1, bytes: 1 })).toThrow(/step/)
    store.removeCheckpoint('r1', 100)
    expect(store.listCheckpoints('r1').map((c) => c.step)).toEqual([200])
    store.removeCheckpoint('r1', 7)  // none there: nothing changes
    expect(store.listCheckpoints('r1').map((c) => c.step)).toEqual([200])
  })
})

describe('corrupt rows', () => {
  beforeEach(() => store.insertRun(runRecord('r1')))

  test('config that is not JSON names the run and the column', () => {
    corrupt("UPDATE runs SET config = '{\"model\": ' WHERE id = ?", 'r1')
    expect(() => store.getRun('r1')).toThrow(/^run r1: stored config is not valid JSON/)
    expect(() => store.listRuns()).toThrow(StoreError)
  })

  test('JSON that fails the schema names the run and the field', () => {
    corrupt(`UPDATE runs SET dataset = '{"path": ""}', config = json_set(config, '$.model.d_model', -4) WHERE id = ?`, 'r1')
    expect(() => store.getRun('r1')).toThrow(/^run r1: stored row is invalid: .*config\.model\.d_model.*dataset\.path/)
  })

  test('an unknown status is reported, not passed on', () => {
    corrupt("UPDATE runs SET status = 'zombie' WHERE id = ?", 'r1')
    expect(() => store.getRun('r1')).toThrow(/^run r1: stored row is invalid: status/)
  })

  test('a bad event row names the run', () => {
    store.addEvent({ runId: 'r1', at: 1, kind: 'log', message: 'x' })
    corrupt("UPDATE events SET kind = 'boom' WHERE run_id = ?", 'r1')
    expect(() => store.listEvents('r1')).toThrow(/^run r1: stored event is invalid: kind/)
  })
})
