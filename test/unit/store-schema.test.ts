import { join } from 'node:path'

import { afterEach, beforeEach, describe, expect, test } from 'vitest'

import { encodeLayered } from '../../main/host/store/blobs'
import { openDatabase, type SqlDatabase } from '../../main/host/store/db'
import { StoreError } from '../../main/host/store/errors'
import { migrate, schemaVersion } from '../../main/host/store/migrate'
import { MIGRATIONS, type Migration } from '../../main/host/store/schema'
import { TelemetryStore } from '../../main/host/store/store'
import { placementOf } from '../bench/synthetic-placement'
import { runRecord, stepRecords, tempDir, wallTimeOf } from './store-fixtures'
import { withExecution } from './synthetic-execution'

let dir: string
let cleanup: () => void
beforeEach(() => ({ dir, cleanup } = tempDir()))
afterEach(() => cleanup())

function columns(db: SqlDatabase, table: string): string[] {
  return db.prepare(`SELECT name FROM pragma_table_info('${table}') ORDER BY cid`).all().map((r) => String(r.name))
}

function withRaw<T>(path: string, fn: (db: SqlDatabase) => T): T {
  const db = openDatabase(path)
  try {
    return fn(db)
  } finally {
    db.close()
  }
}

describe('schema creation', () => {
  test('an empty file gets every table and column at the latest version, in WAL mode', () => {
    const path = join(dir, 'telemetry.sqlite')
    TelemetryStore.open(path).close()
    withRaw(path, (db) => {
      expect(schemaVersion(db)).toBe(MIGRATIONS.length)
      expect(db.prepare('PRAGMA journal_mode').get()?.journal_mode).toBe('wal')
      expect(columns(db, 'runs')).toEqual([
        'id', 'name', 'status', 'config', 'dataset', 'init', 'run_dir', 'created_at', 'started_at', 'finished_at',
        'step', 'total_steps', 'last_loss', 'tokens_per_s', 'error', 'offload', 'expert_shares',
      ])
      expect(columns(db, 'steps')).toEqual([
        'run_id', 'step', 'wall_time', 'loss', 'aux_loss', 'lr', 'grad_norm', 'tokens', 'tokens_per_s', 'step_ms',
        'forward_ms', 'backward_ms', 'optimizer_ms', 'upload_ms', 'upload_hidden_ms', 'stall_ms', 'ssd_ms', 'bytes_h2d',
        'bytes_d2h', 'bytes_ssd_read', 'bytes_ssd_write', 'cache_hits', 'cache_misses', 'peak_device_bytes',
        'peak_host_bytes', 'peak_ssd_bytes', 'prefetch_lead_ms', 'ssd_read_ms', 'eval_loss',
      ])
      expect(columns(db, 'expert_loads')).toEqual(['run_id', 'step', 'tokens', 'placement', 'tiers', 'pins', 'spilled', 'device_peak_bytes', 'selection_bias'])
      expect(columns(db, 'layer_placements')).toEqual([
        'run_id', 'step', 'layer', 'imbalance_before', 'imbalance_after', 'spilled_tokens', 'moved_experts', 'load_before', 'load_after',
        'critical_ms', 'wall_ms', 'predicted_ms', 'token_bytes', 'weight_bytes', 'offload_bytes', 'partitions', 'reuse_strategy',
        'device_busy_ms',
      ])
      expect(columns(db, 'events')).toEqual(['id', 'run_id', 'at', 'kind', 'message'])
      expect(columns(db, 'checkpoints')).toEqual(['run_id', 'step', 'path', 'created_at', 'bytes'])
      const steps = db.prepare("SELECT sql FROM sqlite_schema WHERE name = 'steps'").get()?.sql
      expect(steps).toMatch(/PRIMARY KEY \(run_id, step\)\s*\)\s*WITHOUT ROWID/)
    })
  })

  test('connections run with foreign keys on, NORMAL sync and a busy timeout', () => {
    const path = join(dir, 'telemetry.sqlite')
    withRaw(path, (db) => {
      expect(db.prepare('PRAGMA foreign_keys').get()?.foreign_keys).toBe(1)
      expect(db.prepare('PRAGMA synchronous').get()?.synchronous).toBe(1)
      expect(Number(db.prepare('PRAGMA busy_timeout').get()?.timeout)).toBeGreaterThanOrEqual(1000)
    })
  })

  test('re-opening is idempotent and keeps the data', () => {
    const path = join(dir, 'telemetry.sqlite')
    const store = TelemetryStore.open(path)
    store.insertRun(runRecord('r1'))
    store.appendSteps('r1', stepRecords(1, 3), [1, 2, 3].map(wallTimeOf))
    store.close()
    withRaw(path, (db) => expect(migrate(db)).toEqual({ from: MIGRATIONS.length, to: MIGRATIONS.length }))
    const again = TelemetryStore.open(path)
    expect(again.getRun('r1')?.step).toBe(3)
    expect(again.lastStep('r1')).toBe(3)
    again.close()
  })
})

describe('migrations', () => {
  const v1: Migration = { version: 1, description: 'a', sql: 'CREATE TABLE a (x INTEGER)' }
  const v2: Migration = { version: 2, description: 'b', sql: 'ALTER TABLE a ADD COLUMN y TEXT; CREATE TABLE b (z INTEGER)' }

  test('pending migrations apply in order; applied ones are not re-run', () => {
    withRaw(join(dir, 'm.sqlite'), (db) => {
      expect(migrate(db, [v1])).toEqual({ from: 0, to: 1 })
      db.exec('INSERT INTO a (x) VALUES (7)')
      expect(migrate(db, [v1, v2])).toEqual({ from: 1, to: 2 })
      expect(columns(db, 'a')).toEqual(['x', 'y'])
      expect(db.prepare('SELECT x FROM a').all()).toEqual([{ x: 7 }])
      expect(migrate(db, [v1, v2])).toEqual({ from: 2, to: 2 })
    })
  })

  test('a failing migration rolls back completely and leaves the version where it was', () => {
    const broken: Migration = { version: 2, description: 'broken', sql: 'CREATE TABLE c (x INTEGER); SELECT * FROM missing' }
    withRaw(join(dir, 'm.sqlite'), (db) => {
      migrate(db, [v1])
      expect(() => migrate(db, [v1, broken])).toThrow(/missing/)
      expect(schemaVersion(db)).toBe(1)
      expect(db.prepare("SELECT name FROM sqlite_schema WHERE name = 'c'").get()).toBeUndefined()
    })
  })

  test('a list with a gap or out of order is refused before touching the database', () => {
    withRaw(join(dir, 'm.sqlite'), (db) => {
      expect(() => migrate(db, [v2])).toThrow(/out of order/)
      expect(schemaVersion(db)).toBe(0)
    })
  })

  test('a database from a newer build is refused with a clear message and left unchanged', () => {
    const path = join(dir, 'newer.sqlite')
    withRaw(path, (db) => db.exec(`PRAGMA user_version = ${MIGRATIONS.length + 1}`))
    expect(() => TelemetryStore.open(path)).toThrow(StoreError)
    expect(() => TelemetryStore.open(path)).toThrow(`schema version ${MIGRATIONS.length + 1} is newer than this build supports (${MIGRATIONS.length})`)
    expect(() => TelemetryStore.open(path, { readonly: true })).toThrow(/newer/)
    withRaw(path, (db) => {
      expect(schemaVersion(db)).toBe(MIGRATIONS.length + 1)
      expect(db.prepare("SELECT name FROM sqlite_schema WHERE name = 'runs'").get()).toBeUndefined()
    })
  })

  test('version 1 databases gain the offload columns, their rows reading as resident', () => {
    const path = join(dir, 'v1.sqlite')
    const r1 = runRecord('r1')
    withRaw(path, (db) => {
      migrate(db, MIGRATIONS.slice(0, 1))
      db.prepare('INSERT INTO runs (id, name, status, config, dataset, run_dir, created_at, total_steps) VALUES (?, ?, ?, ?, ?, ?, ?, ?)')
        .run('r1', r1.name, 'finished', JSON.stringify(r1.config), JSON.stringify(r1.dataset), r1.runDir, 1, 1)
      db.prepare('INSERT INTO steps (run_id, step, wall_time, loss) VALUES (?, ?, ?, ?)').run('r1', 1, 1, 2.5)
    })
    TelemetryStore.open(path).close()
    withRaw(path, (db) => {
      expect(schemaVersion(db)).toBe(MIGRATIONS.length)
      expect(db.prepare('SELECT offload FROM runs').get()).toEqual({ offload: null })
      expect(db.prepare('SELECT loss, prefetch_lead_ms FROM steps').get()).toEqual({ loss: 2.5, prefetch_lead_ms: null })
    })
    const store = TelemetryStore.open(path)
    expect(store.getRun('r1')?.offload).toBeNull()
    const offload = { requested: 'auto', mode: 'host', deviceBudgetBytes: 2 ** 30, hostBudgetBytes: null, slots: 4, cacheExperts: null, explanation: 'auto → host' } as const
    store.insertRun(runRecord('r2', { offload }))
    expect(store.getRun('r2')?.offload).toEqual(offload)
    store.appendSteps('r2', [{ ...stepRecords(1, 1)[0]!, prefetch_lead_ms: 1.5 }], [wallTimeOf(1)])
    expect(store.series('r2', ['prefetch_lead_ms'], { maxPoints: 10 }).values['prefetch_lead_ms']).toEqual([1.5])
    store.close()
  })

  test('version 2 databases gain an empty layer_placements table; their steps read as placing nothing', () => {
    const path = join(dir, 'v2.sqlite')
    const store = TelemetryStore.open(path)
    store.insertRun(runRecord('r1'))
    store.appendSteps('r1', stepRecords(1, 2), [1, 2].map(wallTimeOf))
    store.close()
    withRaw(path, (db) => {
      db.exec('DROP TABLE layer_placements; ALTER TABLE expert_loads DROP COLUMN device_peak_bytes; ALTER TABLE steps DROP COLUMN ssd_read_ms; ALTER TABLE expert_loads DROP COLUMN selection_bias; ALTER TABLE steps DROP COLUMN eval_loss; ALTER TABLE runs DROP COLUMN expert_shares; PRAGMA user_version = 2')
    })
    const migrated = TelemetryStore.open(path)
    expect(migrated.stepLoads('r1', 2)?.devices).toBeNull()
    expect(migrated.placementSeries('r1', 0, { maxPoints: 10 }).steps).toEqual([])
    const placed = stepRecords(3, 1)[0]!
    migrated.appendSteps('r1', [{ ...placed, placement: placementOf(placed.expertTokens, 2) }], [wallTimeOf(3)])
    expect(migrated.placementSeries('r1', 0, { maxPoints: 10 }).steps).toEqual([3])
    migrated.close()
    withRaw(path, (db) => expect(schemaVersion(db)).toBe(MIGRATIONS.length))
  })

  test('version 3 databases gain the execution columns; their placed steps read as not measured beside new ones that are', () => {
    const path = join(dir, 'v3.sqlite')
    withRaw(path, (db) => migrate(db, MIGRATIONS.slice(0, 3)))
    const r1 = runRecord('r1')
    const [first, second] = stepRecords(1, 2) as [ReturnType<typeof stepRecords>[number], ReturnType<typeof stepRecords>[number]]
    const placed = { ...first, placement: placementOf(first.expertTokens, 2) }
    // A step written by the version 3 store: its layer_placements rows have no execution columns.
    withRaw(path, (db) => {
      db.prepare('INSERT INTO runs (id, name, status, config, dataset, run_dir, created_at, total_steps) VALUES (?, ?, ?, ?, ?, ?, ?, ?)')
        .run('r1', r1.name, 'finished', JSON.stringify(r1.config), JSON.stringify(r1.dataset), r1.runDir, 1, 2)
      db.prepare('INSERT INTO steps (run_id, step, wall_time, loss) VALUES (?, ?, ?, ?)').run('r1', 1, 1, 2.5)
      db.prepare('INSERT INTO expert_loads (run_id, step, tokens) VALUES (?, ?, ?)').run('r1', 1, encodeLayered(placed.expertTokens, 4))
      placed.placement.layers.forEach((l, layer) =>
        db.prepare(`INSERT INTO layer_placements (run_id, step, layer, imbalance_before, imbalance_after, spilled_tokens, moved_experts,
          load_before, load_after) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`).run('r1', 1, layer, l.imbalanceBefore, l.imbalanceAfter,
          l.spilledTokens, l.movedExperts, encodeLayered([l.loadBefore], 4), encodeLayered([l.loadAfter], 4)))
    })
    const store = TelemetryStore.open(path)
    withRaw(path, (db) => expect(schemaVersion(db)).toBe(MIGRATIONS.length))
    const old = store.stepLoads('r1', 1)!
    expect(old.devicePeakBytes).toBeNull()
    expect(old.devices!.map((d) => d.execution)).toEqual([null, null, null, null])
    expect(old.devices![0]!.imbalanceBefore).toBe(placed.placement.layers[0]!.imbalanceBefore)
    const executed = { ...second, placement: withExecution(placementOf(second.expertTokens, 2), { partitions: 2, reuse: 3 }) }
    store.appendSteps('r1', [executed], [wallTimeOf(2)])
    expect(store.stepLoads('r1', 2)!.devices![1]!.execution).toEqual(executed.placement.layers[1]!.execution)
    expect(store.stepLoads('r1', 2)!.devicePeakBytes).toEqual(executed.placement.devicePeakBytes)
    expect(store.placementSeries('r1', 0, { maxPoints: 10 })).toMatchObject({
      steps: [1, 2], criticalMs: [null, executed.placement.layers[0]!.execution.criticalMs],
    })
    store.close()
  })

  test('a read-only connection does not migrate an older database', () => {
    const path = join(dir, 'old.sqlite')
    withRaw(path, () => undefined)
    expect(() => TelemetryStore.open(path, { readonly: true })).toThrow(`version 0 is older than this build's ${MIGRATIONS.length}; open it read-write`)
    TelemetryStore.open(path).close()
    const reader = TelemetryStore.open(path, { readonly: true })
    expect(reader.listRuns()).toEqual([])
    expect(() => reader.insertRun(runRecord('r1'))).toThrow(/readonly/)
    reader.close()
  })
})
