// The per-step field table (native/engine/include/moe_step_fields.h) and what the workbench derives from it:
// main/api/step-fields.ts is what the generator makes of the table today, the `steps` table's columns are the
// table's fields, and the API's metrics cover every field (the chart labels: test/renderer/metric-labels.test.ts).
import { spawnSync } from 'node:child_process'
import { cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

import { afterEach, beforeEach, describe, expect, test } from 'vitest'

import { ScalarMetricSchema, StepMetricsSchema } from '../../main/api/contract'
import { OFFLOAD_FIELD_NAMES, STEP_FIELDS } from '../../main/api/step-fields'
import { openDatabase } from '../../main/host/store/db'
import { MIGRATIONS } from '../../main/host/store/schema'
import { TelemetryStore } from '../../main/host/store/store'
import { runRecord, stepRecords, tempDir, wallTimeOf } from './store-fixtures'

const root = fileURLToPath(new URL('../..', import.meta.url))
const TABLE = 'native/engine/include/moe_step_fields.h'
const OUTPUT = 'main/api/step-fields.ts'

const generator = (...args: string[]) =>
  spawnSync(process.execPath, [join(root, 'scripts/gen-step-fields.mjs'), ...args], { encoding: 'utf8' })

let dir: string
let cleanup: () => void
beforeEach(() => ({ dir, cleanup } = tempDir()))
afterEach(() => cleanup())

describe('the generated step-fields.ts', () => {
  test('is what the generator makes of the table now', () => {
    const check = generator('--check')
    expect(check.stderr).toBe('')
    expect(check.status).toBe(0)
  })

  test('is reported stale once the table gains a field, and regenerating carries the field', () => {
    for (const path of [TABLE, OUTPUT]) {
      mkdirSync(join(dir, path, '..'), { recursive: true })
      cpSync(join(root, path), join(dir, path))
    }
    const table = readFileSync(join(dir, TABLE), 'utf8').replace(
      /(SCALAR\(eval_loss[^\n]*\))\n/,
      '$1 \\\n  SCALAR(router_ms, double, "ms", "time", "Router (ms)", "routing, top-k and the load-balancing loss")\n',
    )
    expect(table).toContain('SCALAR(router_ms')
    writeFileSync(join(dir, TABLE), table)
    const stale = generator('--check', '--root', dir)
    expect(stale.status).toBe(1)
    expect(stale.stderr).toContain(`${OUTPUT} is stale`)
    expect(generator('--root', dir).status).toBe(0)
    const regenerated = readFileSync(join(dir, OUTPUT), 'utf8')
    expect(regenerated).toContain("name: 'router_ms', cType: 'double', unit: 'ms', group: 'time', label: 'Router (ms)'")
    expect(generator('--check', '--root', dir).status).toBe(0)
  })

  test('a SCALAR entry the generator cannot read fails it, naming the table', () => {
    mkdirSync(join(dir, TABLE, '..'), { recursive: true })
    writeFileSync(join(dir, TABLE), readFileSync(join(root, TABLE), 'utf8').replace('SCALAR(loss, double, "",', 'SCALAR(loss, double,'))
    const bad = generator('--check', '--root', dir)
    expect(bad.status).not.toBe(0)
    expect(bad.stderr).toContain(`${TABLE}: a SCALAR entry did not parse`)
  })

  test('lists ssd_read_ms, an SSD-tier field recorded only on offloaded steps', () => {
    expect(STEP_FIELDS.find((f) => f.name === 'ssd_read_ms')).toMatchObject({ group: 'ssd', unit: 'ms' })
    expect(OFFLOAD_FIELD_NAMES).toContain('ssd_read_ms')
  })
})

describe('what derives from the table', () => {
  test('the `steps` columns are run_id, wall_time, tokens_per_s and the table’s fields', () => {
    const path = join(dir, 'telemetry.sqlite')
    TelemetryStore.open(path).close()
    const db = openDatabase(path)
    const columns = db.prepare("SELECT name FROM pragma_table_info('steps')").all().map((r) => String(r.name))
    db.close()
    expect(columns.sort()).toEqual(['run_id', 'wall_time', 'tokens_per_s', ...STEP_FIELDS.map((f) => f.name)].sort())
  })

  test('every field but the step number is an API metric; live steps carry the always-recorded ones', () => {
    const metrics = STEP_FIELDS.map((f) => f.name).filter((n) => n !== 'step')
    expect([...ScalarMetricSchema.options].sort()).toEqual([...metrics, 'tokens_per_s'].sort())
    const live = Object.keys(StepMetricsSchema.shape)
    expect(live).toEqual(expect.arrayContaining(['step', 'wallTime', 'loss', 'optimizer_ms', 'tokens_per_s']))
    for (const name of OFFLOAD_FIELD_NAMES) expect(live).not.toContain(name)
  })

  test('version 4 databases gain ssd_read_ms; their steps read it as null beside new steps that carry it', () => {
    const path = join(dir, 'v4.sqlite')
    const store = TelemetryStore.open(path)
    store.insertRun(runRecord('r1'))
    store.appendSteps('r1', stepRecords(1, 1), [wallTimeOf(1)])
    store.close()
    const raw = openDatabase(path)
    raw.exec('ALTER TABLE steps DROP COLUMN ssd_read_ms; ALTER TABLE expert_loads DROP COLUMN selection_bias; ALTER TABLE steps DROP COLUMN eval_loss; ALTER TABLE runs DROP COLUMN expert_shares; PRAGMA user_version = 4')
    raw.close()
    const migrated = TelemetryStore.open(path)
    migrated.appendSteps('r1', [{ ...stepRecords(2, 1)[0]!, ssd_read_ms: 3.25 }], [wallTimeOf(2)])
    expect(migrated.series('r1', ['ssd_read_ms'], { maxPoints: 10 }).values['ssd_read_ms']).toEqual([NaN, 3.25])
    migrated.close()
    expect(MIGRATIONS.find((m) => m.version === 5)!.sql).toContain('ssd_read_ms')
  })
})
