// The telemetry store: every read and write of the project's SQLite database goes through this
// class. The engine process appends steps (one transaction per call) while the main process writes
// run metadata and reads history; WAL keeps readers and the single writer out of each other's way.
import { z } from 'zod'

import { CheckpointSchema, RunEventSchema, ScalarMetricSchema } from '../../api/contract'
import { moeLayerIndexes } from '../../api/model-families'
import type { Checkpoint, ExpertLoadSchema, PlacementSeries, RunEvent, RunTotals, ScalarMetric, SeriesSchema } from '../../api/contract'
import { decodeFloat64s, elementReader, layeredArrays, viewLayered, type LayeredView } from './blobs'
import { openDatabase, type DriverName, type SqlDatabase, type SqlRow } from './db'
import { bucketStart, minMaxIndices } from './downsample'
import { StoreError } from './errors'
import { assertCurrentSchema, migrate } from './migrate'
import { INSERT_PLACEMENT_SQL, decodeLayerDevices, type LayerDevices } from './placement-rows'
import { RUN_COLUMNS, patchToColumns, runFromRow, runToRow } from './run-rows'
import { runTotals } from './run-totals'
import { INSERT_LOADS_SQL, INSERT_STEP_SQL, encodeStep, tokensPerSecond } from './step-rows'
import type { RunRecord, StepTelemetry } from './types'

export type { LayerDevices } from './placement-rows'
export type { DatasetSpec, RunRecord, StepTelemetry } from './types'
export { EXPERT_TIER } from './types'
export { StoreError } from './errors'

export type Series = z.output<typeof SeriesSchema>
export type ExpertLoad = z.output<typeof ExpertLoadSchema>

/** Everything recorded per MoE layer for one step; arrays absent from the step are null. */
export interface StepLoads {
  tokens: Int32Array[]
  placement: Int32Array[] | null
  tiers: Int32Array[] | null
  pins: Int32Array[] | null
  spilledTokens: Int32Array[] | null
  /** The placement across devices per MoE layer; null when experts ran in the MoE layer itself (one device). */
  devices: LayerDevices[] | null
  /** Each device's peak bytes at the step; null when not recorded (before step record v5, or not measured). */
  devicePeakBytes: Float64Array | null
  /** Each expert's router selection bias after the step; null for models without one (or steps before migration 6). */
  selectionBias: Float64Array[] | null
}

interface StepRange {
  fromStep?: number
  toStep?: number
}

const MetricsSchema = z.array(ScalarMetricSchema).min(1)
const INSERT_RUN_SQL = `INSERT INTO runs (id, ${Object.values(RUN_COLUMNS).join(', ')}) VALUES (${['id', ...Object.values(RUN_COLUMNS)].map(() => '?').join(', ')})`
const LAST_STEP_SQL = 'SELECT max(step) AS step FROM steps WHERE run_id = ?'
const SET_PROGRESS_SQL = 'UPDATE runs SET step = ?, last_loss = ?, tokens_per_s = ? WHERE id = ?'

// runs.last_loss / tokens_per_s feed run summaries, whose numbers must be finite.
const finiteOrNull = (v: number | null): number | null => (v !== null && Number.isFinite(v) ? v : null)

// The selection bias blob of one step, split into the layers of its tokens blob.
function decodeSelectionBias(runId: string, row: SqlRow, tokens: LayeredView): Float64Array[] {
  try {
    if (!(row.selection_bias instanceof Uint8Array)) throw new RangeError('not a blob')
    const sizes = Array.from({ length: tokens.layers }, (_, l) => tokens.length(l))
    const all = decodeFloat64s(row.selection_bias, sizes.reduce((a, b) => a + b, 0))
    let at = 0
    return sizes.map((n) => all.slice(at, (at += n)))
  } catch (e) {
    throw new StoreError(`run ${runId} step ${Number(row.step)}: expert_loads.selection_bias is corrupt: ${(e as Error).message}`)
  }
}

const moeLayersOf = (c: RunRecord['config']) => moeLayerIndexes(c.model).length

function stepBounds(runId: string, range: StepRange): [number, number] {
  const from = range.fromStep ?? 0
  const to = range.toStep ?? Number.MAX_SAFE_INTEGER
  if (!Number.isSafeInteger(from) || !Number.isSafeInteger(to) || from < 0 || to < 0)
    throw new StoreError(`run ${runId}: fromStep/toStep must be non-negative integers (got ${range.fromStep}, ${range.toStep})`)
  return [from, to]
}

export class TelemetryStore {
  private constructor(private readonly db: SqlDatabase) {}

  /** Opens (creating and migrating when writable) the database at dbPath. */
  static open(dbPath: string, options: { readonly?: boolean } = {}): TelemetryStore {
    const db = openDatabase(dbPath, { readonly: options.readonly ?? false })
    try {
      if (db.readonly) assertCurrentSchema(db)
      else migrate(db)
    } catch (e) {
      db.close()
      throw e
    }
    return new TelemetryStore(db)
  }

  /** The SQLite binding in use (better-sqlite3 under Node, node:sqlite where only that loads). */
  get driver(): DriverName {
    return this.db.driver
  }

  insertRun(r: RunRecord): void {
    const values = runToRow(r)
    this.db.transaction(() => {
      if (this.hasRun(r.id)) throw new StoreError(`run ${r.id} already exists`)
      this.db.prepare(INSERT_RUN_SQL).run(...values)
    })
  }

  updateRun(id: string, patch: Partial<Omit<RunRecord, 'id'>>): void {
    const { columns, values } = patchToColumns(id, patch)
    if (columns.length === 0) {
      this.requireRun(id)
      return
    }
    const sql = `UPDATE runs SET ${columns.map((c) => `${c} = ?`).join(', ')} WHERE id = ?`
    if (this.db.prepare(sql).run(...values, id).changes === 0) throw this.unknownRun(id)
  }

  getRun(id: string): RunRecord | undefined {
    const row = this.db.prepare('SELECT * FROM runs WHERE id = ?').get(id)
    return row && runFromRow(row)
  }

  /** Peak bytes per tier and bytes moved over all of a run's steps. */
  totals(runId: string): RunTotals {
    this.requireRun(runId)
    return runTotals(this.db, runId)
  }

  /** Newest first. */
  listRuns(): RunRecord[] {
    return this.db.prepare('SELECT * FROM runs ORDER BY created_at DESC, rowid DESC').all().map(runFromRow)
  }

  /** Removes the run with its steps, expert loads, events and checkpoint records (foreign-key cascades). */
  deleteRun(id: string): void {
    if (this.db.prepare('DELETE FROM runs WHERE id = ?').run(id).changes === 0) throw this.unknownRun(id)
  }

  addEvent(e: RunEvent): void {
    const event = this.validate(RunEventSchema, e, `event of run ${String(e.runId)}`)
    this.db.transaction(() => {
      this.requireRun(event.runId)
      this.db.prepare('INSERT INTO events (run_id, at, kind, message) VALUES (?, ?, ?, ?)')
        .run(event.runId, event.at, event.kind, event.message)
    })
  }

  /** Oldest first. */
  listEvents(runId: string): RunEvent[] {
    return this.db
      .prepare('SELECT run_id AS runId, at, kind, message FROM events WHERE run_id = ? ORDER BY at, id')
      .all(runId)
      .map((row) => this.validateStored(RunEventSchema, row, runId, 'event'))
  }

  /** Records a checkpoint; a second checkpoint at the same step (after a resume) replaces the first. */
  addCheckpoint(c: Checkpoint): void {
    const checkpoint = this.validate(CheckpointSchema, c, `checkpoint of run ${String(c.runId)}`)
    this.db.transaction(() => {
      this.requireRun(checkpoint.runId)
      this.db
        .prepare(
          `INSERT INTO checkpoints (run_id, step, path, created_at, bytes) VALUES (?, ?, ?, ?, ?)
           ON CONFLICT (run_id, step) DO UPDATE SET path = excluded.path, created_at = excluded.created_at, bytes = excluded.bytes`,
        )
        .run(checkpoint.runId, checkpoint.step, checkpoint.path, checkpoint.createdAt, checkpoint.bytes)
    })
  }

  /** Forgets the run's checkpoint at `step` (its folder is gone: train.keep_checkpoints removed it). */
  removeCheckpoint(runId: string, step: number): void {
    this.db.prepare('DELETE FROM checkpoints WHERE run_id = ? AND step = ?').run(runId, step)
  }

  /** Ascending by step. */
  listCheckpoints(runId: string): Checkpoint[] {
    return this.db
      .prepare('SELECT run_id AS runId, step, path, created_at AS createdAt, bytes FROM checkpoints WHERE run_id = ? ORDER BY step')
      .all(runId)
      .map((row) => this.validateStored(CheckpointSchema, row, runId, 'checkpoint'))
  }

  /**
   * Appends steps (numbered from 1, strictly increasing, after the last stored step) with their expert
   * loads, and moves runs.step / last_loss / tokens_per_s to the last of them, all in one transaction:
   * a reader sees all of a batch or none of it. wallTimes[i] is when records[i] ended (ms since epoch).
   */
  appendSteps(runId: string, records: readonly StepTelemetry[], wallTimes: readonly number[]): void {
    if (records.length !== wallTimes.length)
      throw new StoreError(`run ${runId}: ${records.length} step records but ${wallTimes.length} wall times`)
    if (records.length === 0) return
    // Encode before taking the write lock, so the lock is held only for the inserts.
    const encoded = records.map((r, i) => encodeStep(runId, r, wallTimes[i]))
    encoded.forEach((e, i) => {
      if (e.step < 1 || (i > 0 && e.step <= encoded[i - 1].step))
        throw new StoreError(`run ${runId}: step ${e.step} does not follow ${i > 0 ? encoded[i - 1].step : 0} in this batch`)
    })
    const insertStep = this.db.prepare(INSERT_STEP_SQL)
    const insertLoads = this.db.prepare(INSERT_LOADS_SQL)
    const insertPlacement = this.db.prepare(INSERT_PLACEMENT_SQL)
    const last = encoded[encoded.length - 1]
    const lastRecord = records[records.length - 1]
    this.db.transaction(() => {
      this.requireRun(runId)
      const stored = this.lastStep(runId)
      if (encoded[0].step <= stored)
        throw new StoreError(
          `run ${runId}: step ${encoded[0].step} is not after the last stored step ${stored}; truncateSteps before rewriting steps`,
        )
      for (const e of encoded) {
        insertStep.run(...e.stepValues)
        insertLoads.run(...e.loadValues)
        for (const row of e.placementValues) insertPlacement.run(...row)
      }
      this.db
        .prepare(SET_PROGRESS_SQL)
        .run(last.step, finiteOrNull(lastRecord.loss), finiteOrNull(tokensPerSecond(lastRecord)), runId)
    })
  }

  /** Deletes the steps (and their expert loads) after afterStep, and rewinds the run's progress to it. */
  truncateSteps(runId: string, afterStep: number): void {
    if (!Number.isSafeInteger(afterStep) || afterStep < 0)
      throw new StoreError(`run ${runId}: cannot truncate after step ${afterStep}`)
    this.db.transaction(() => {
      this.requireRun(runId)
      this.db.prepare('DELETE FROM steps WHERE run_id = ? AND step > ?').run(runId, afterStep)
      const last = this.db
        .prepare('SELECT step, loss, tokens_per_s FROM steps WHERE run_id = ? ORDER BY step DESC LIMIT 1')
        .get(runId)
      this.db.prepare(SET_PROGRESS_SQL).run(
        last ? Number(last.step) : 0,
        finiteOrNull((last?.loss as number | null | undefined) ?? null),
        finiteOrNull((last?.tokens_per_s as number | null | undefined) ?? null),
        runId,
      )
    })
  }

  /** The last stored step of the run, 0 when it has none. */
  lastStep(runId: string): number {
    return Number(this.db.prepare(LAST_STEP_SQL).get(runId)?.step ?? 0)
  }

  /**
   * Scalar metrics over a step range, at most maxPoints rows: bucketed min/max of every metric plus the
   * first and last step (see downsample.ts). Non-finite or missing values read as NaN.
   */
  series(runId: string, metrics: ScalarMetric[], opts: StepRange & { maxPoints: number }): Series {
    const parsed = MetricsSchema.safeParse(metrics)
    if (!parsed.success)
      throw new StoreError(
        `run ${runId}: metrics must be a non-empty list of ${ScalarMetricSchema.options.join(', ')} (got ${JSON.stringify(metrics)})`,
      )
    if (!Number.isInteger(opts.maxPoints) || opts.maxPoints < 2)
      throw new StoreError(`run ${runId}: maxPoints must be an integer >= 2 (got ${opts.maxPoints})`)
    const [from, to] = stepBounds(runId, opts)
    this.requireRun(runId)
    // Column names come from the validated metric enum, never from the caller's text.
    const columns = [...new Set(parsed.data)]
    const rows = this.db
      .prepare(`SELECT step, wall_time, ${columns.join(', ')} FROM steps WHERE run_id = ? AND step BETWEEN ? AND ? ORDER BY step`)
      .all(runId, from, to)
    const numeric = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : NaN)
    const valueColumns = columns.map((c) => Float64Array.from(rows, (row) => numeric(row[c])))
    const picked = minMaxIndices(valueColumns, rows.length, opts.maxPoints)
    const values: Record<string, number[]> = {}
    columns.forEach((c, k) => (values[c] = picked.map((i) => valueColumns[k][i])))
    return {
      step: picked.map((i) => Number(rows[i].step)),
      wallTime: picked.map((i) => Number(rows[i].wall_time)),
      values,
    }
  }

  /**
   * Tokens per expert of one MoE layer over a step range. With more than maxSteps steps, steps are
   * grouped into maxSteps contiguous buckets: counts are the bucket's mean and steps[b] its first step.
   */
  expertLoad(runId: string, layer: number, opts: StepRange & { maxSteps: number }): ExpertLoad {
    if (!Number.isInteger(layer) || layer < 0) throw new StoreError(`run ${runId}: layer ${layer} is not a layer index`)
    if (!Number.isInteger(opts.maxSteps) || opts.maxSteps < 1)
      throw new StoreError(`run ${runId}: maxSteps must be an integer >= 1 (got ${opts.maxSteps})`)
    const [from, to] = stepBounds(runId, opts)
    this.requireRun(runId)
    const first = this.db
      .prepare('SELECT step, tokens FROM expert_loads WHERE run_id = ? AND step BETWEEN ? AND ? ORDER BY step LIMIT 1')
      .get(runId, from, to)
    if (!first) return { layer, experts: this.configuredExperts(runId, layer), steps: [], counts: [], bias: null }
    const layout = this.storedLayers(runId, first, 'tokens')
    if (layer >= layout.layers) throw this.layerOutOfRange(runId, first, layer, layout)
    const experts = layout.length(layer)

    // Rows laid out like the first (same length and header, as every step of a run is) yield just
    // this layer's bytes from SQLite, which halves the read time against copying whole blobs.
    const firstBlob = first.tokens as Uint8Array
    const rows = this.db
      .prepare(
        `SELECT step, (length(tokens) = ? AND substr(tokens, 1, ?) = ?) AS same_layout, substr(tokens, ?, ?) AS slice
         FROM expert_loads WHERE run_id = ? AND step BETWEEN ? AND ? ORDER BY step`,
      )
      .all(layout.byteLength, layout.headerBytes, firstBlob.subarray(0, layout.headerBytes),
        layout.byteOffset(layer) + 1, experts * layout.elementBytes, runId, from, to)
    const readers = rows.map((row) =>
      row.same_layout === 1 && row.slice instanceof Uint8Array
        ? elementReader(row.slice, layout.elementBytes)
        : this.otherLayoutReader(runId, Number(row.step), layer, experts),
    )

    const n = rows.length
    const buckets = Math.min(n, opts.maxSteps)
    const steps: number[] = []
    const counts = new Array<number>(buckets * experts).fill(0)
    for (let b = 0; b < buckets; b++) {
      const lo = bucketStart(n, buckets, b)
      const hi = bucketStart(n, buckets, b + 1)
      steps.push(Number(rows[lo].step))
      for (let i = lo; i < hi; i++) for (let e = 0; e < experts; e++) counts[b * experts + e] += readers[i](e)
      if (hi - lo > 1) for (let e = 0; e < experts; e++) counts[b * experts + e] /= hi - lo
    }
    const bias = this.biasBuckets(runId, layer, layout, firstBlob.subarray(0, layout.headerBytes), from, to, buckets)
    return { layer, experts, steps, counts, bias }
  }

  // One layer's selection bias over the same rows and buckets as its loads (bucket means); null when the run
  // records none.
  private biasBuckets(runId: string, layer: number, layout: LayeredView, header: Uint8Array, from: number, to: number, buckets: number): number[] | null {
    const experts = layout.length(layer)
    const first = (layout.byteOffset(layer) - layout.headerBytes) / layout.elementBytes
    const rows = this.db
      .prepare(
        `SELECT step, (length(tokens) = ? AND substr(tokens, 1, ?) = ?) AS same_layout, substr(selection_bias, ?, ?) AS slice
         FROM expert_loads WHERE run_id = ? AND step BETWEEN ? AND ? ORDER BY step`,
      )
      .all(layout.byteLength, layout.headerBytes, header, 8 * first + 1, 8 * experts, runId, from, to)
    if (rows.length === 0 || rows[0]!.slice == null) return null
    const values = rows.map((row) => {
      // A step laid out unlike the first: its own tokens header says where the layer is.
      if (row.same_layout !== 1) {
        const own = this.stepLoads(runId, Number(row.step))?.selectionBias?.[layer]
        if (own?.length === experts) return own
        throw new StoreError(`run ${runId} step ${Number(row.step)}: expert_loads.selection_bias has no layer ${layer} of ${experts} experts`)
      }
      try {
        if (!(row.slice instanceof Uint8Array)) throw new RangeError('missing while the run records it')
        return decodeFloat64s(row.slice, experts)
      } catch (e) {
        throw new StoreError(`run ${runId} step ${Number(row.step)}: expert_loads.selection_bias is corrupt: ${(e as Error).message}`)
      }
    })
    const out = new Array<number>(buckets * experts).fill(0)
    for (let b = 0; b < buckets; b++) {
      const lo = bucketStart(rows.length, buckets, b)
      const hi = bucketStart(rows.length, buckets, b + 1)
      for (let i = lo; i < hi; i++) for (let e = 0; e < experts; e++) out[b * experts + e] += values[i]![e]! / (hi - lo)
    }
    return out
  }

  /** Every per-layer array recorded for one step (for replay), or undefined when the step has none. */
  stepLoads(runId: string, step: number): StepLoads | undefined {
    const row = this.db
      .prepare('SELECT step, tokens, placement, tiers, pins, spilled, device_peak_bytes, selection_bias FROM expert_loads WHERE run_id = ? AND step = ?')
      .get(runId, step)
    if (!row) return undefined
    const decode = (column: string) => (row[column] == null ? null : layeredArrays(this.storedLayers(runId, row, column)))
    const placed = this.db.prepare('SELECT * FROM layer_placements WHERE run_id = ? AND step = ? ORDER BY layer').all(runId, step)
    const tokens = this.storedLayers(runId, row, 'tokens')
    return {
      tokens: layeredArrays(tokens),
      placement: decode('placement'),
      tiers: decode('tiers'),
      pins: decode('pins'),
      spilledTokens: decode('spilled'),
      devices: placed.length > 0 ? placed.map((p) => decodeLayerDevices(runId, p)) : null,
      devicePeakBytes: this.devicePeaks(runId, row),
      selectionBias: row.selection_bias == null ? null : decodeSelectionBias(runId, row, tokens),
    }
  }

  private devicePeaks(runId: string, row: SqlRow): Float64Array | null {
    if (row.device_peak_bytes == null) return null
    try {
      if (!(row.device_peak_bytes instanceof Uint8Array)) throw new RangeError('not a blob')
      return decodeFloat64s(row.device_peak_bytes)
    } catch (e) {
      throw new StoreError(`run ${runId} step ${Number(row.step)}: expert_loads.device_peak_bytes is corrupt: ${(e as Error).message}`)
    }
  }

  /**
   * One MoE layer's placement over a step range, at most maxPoints steps (bucketed min/max of every
   * column plus the first and last step, as `series`), with the layer's critical and predicted ms where the
   * engine measured them (null elsewhere). Empty for a run that places nothing.
   */
  placementSeries(runId: string, layer: number, opts: StepRange & { maxPoints: number }): PlacementSeries {
    if (!Number.isInteger(layer) || layer < 0) throw new StoreError(`run ${runId}: layer ${layer} is not a layer index`)
    if (!Number.isInteger(opts.maxPoints) || opts.maxPoints < 2)
      throw new StoreError(`run ${runId}: maxPoints must be an integer >= 2 (got ${opts.maxPoints})`)
    const [from, to] = stepBounds(runId, opts)
    this.requireRun(runId)
    const moeLayers = moeLayersOf((this.getRun(runId) as RunRecord).config)
    if (layer >= moeLayers) throw new StoreError(`run ${runId}: layer ${layer} is out of range (${moeLayers} MoE layers)`)
    const rows = this.db
      .prepare(
        `SELECT step, imbalance_before, imbalance_after, spilled_tokens, moved_experts, critical_ms, predicted_ms
         FROM layer_placements WHERE run_id = ? AND layer = ? AND step BETWEEN ? AND ? ORDER BY step`,
      )
      .all(runId, layer, from, to)
    // NULL (not measured) reads as NaN, which never wins a bucket, and goes out as null.
    const column = (name: string) => Float64Array.from(rows, (row) => (row[name] == null ? Number.NaN : Number(row[name])))
    const before = column('imbalance_before')
    const after = column('imbalance_after')
    const spilled = column('spilled_tokens')
    const moved = column('moved_experts')
    const critical = column('critical_ms')
    const predicted = column('predicted_ms')
    const picked = minMaxIndices([before, after, spilled, moved, critical, predicted], rows.length, opts.maxPoints)
    const at = (values: Float64Array) => picked.map((i) => values[i]!)
    const measured = (values: Float64Array) => picked.map((i) => (Number.isNaN(values[i]!) ? null : values[i]!))
    return {
      layer,
      steps: picked.map((i) => Number(rows[i]!.step)),
      imbalanceBefore: at(before),
      imbalanceAfter: at(after),
      spilledTokens: at(spilled),
      movedExperts: at(moved),
      criticalMs: measured(critical),
      predictedMs: measured(predicted),
    }
  }

  close(): void {
    this.db.close()
  }

  private hasRun(id: string): boolean {
    return this.db.prepare('SELECT 1 AS found FROM runs WHERE id = ?').get(id) !== undefined
  }

  private requireRun(id: string): void {
    if (!this.hasRun(id)) throw this.unknownRun(id)
  }

  private unknownRun(id: string): StoreError {
    return new StoreError(`unknown run ${JSON.stringify(id)}`)
  }

  private validate<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
    const parsed = schema.safeParse(value)
    if (!parsed.success)
      throw new StoreError(`${what}: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(value)'}: ${i.message}`).join('; ')}`)
    return parsed.data
  }

  private validateStored<T>(schema: z.ZodType<T>, row: SqlRow, runId: string, what: string): T {
    return this.validate(schema, row, `run ${runId}: stored ${what} is invalid`)
  }

  private storedBlob(runId: string, row: SqlRow, column: string): Uint8Array {
    const blob = row[column]
    if (!(blob instanceof Uint8Array)) throw new StoreError(`run ${runId} step ${Number(row.step)}: expert_loads.${column} is not a blob`)
    return blob
  }

  private storedLayers(runId: string, row: SqlRow, column: string): LayeredView {
    try {
      return viewLayered(this.storedBlob(runId, row, column))
    } catch (e) {
      if (e instanceof StoreError) throw e
      throw new StoreError(`run ${runId} step ${Number(row.step)}: expert_loads.${column} is corrupt: ${(e as Error).message}`)
    }
  }

  // A run with no steps yet still has a shape: its config's experts for that layer.
  // A step whose blob differs from the run's first: decode it whole (this also reports corruption).
  private otherLayoutReader(runId: string, step: number, layer: number, experts: number): (e: number) => number {
    const row = this.db.prepare('SELECT step, tokens FROM expert_loads WHERE run_id = ? AND step = ?').get(runId, step) as SqlRow
    const view = this.storedLayers(runId, row, 'tokens')
    if (layer >= view.layers) throw this.layerOutOfRange(runId, row, layer, view)
    if (view.length(layer) !== experts)
      throw new StoreError(`run ${runId} step ${step}: layer ${layer} has ${view.length(layer)} experts, not ${experts}`)
    return (e) => view.at(layer, e)
  }

  private layerOutOfRange(runId: string, row: SqlRow, layer: number, view: LayeredView): StoreError {
    return new StoreError(`run ${runId} step ${Number(row.step)}: layer ${layer} is out of range (${view.layers} MoE layers)`)
  }

  private configuredExperts(runId: string, layer: number): number {
    const config = (this.getRun(runId) as RunRecord).config
    const moeLayers = moeLayersOf(config)
    if (layer >= moeLayers) throw new StoreError(`run ${runId}: layer ${layer} is out of range (${moeLayers} MoE layers)`)
    const m = config.model
    return Array.isArray(m.n_experts) ? m.n_experts[layer] : m.n_experts
  }
}
