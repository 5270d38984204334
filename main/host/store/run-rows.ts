// runs rows <-> RunRecord: validated on the way in (bad input changes nothing) and on the way out
// (a corrupt row is reported with its run id instead of surfacing as a confusing failure later).
import { z } from 'zod'

import { RunConfigSchema } from '../../api/config'
import { ExpertSharesSchema, ResolvedOffloadSchema, RunIdSchema, RunStatusSchema, StoredDatasetSchema } from '../../api/contract'
import type { SqlRow, SqlValue } from './db'
import { StoreError } from './errors'
import type { RunRecord } from './types'

const RunRecordSchema = z.object({
  id: RunIdSchema,
  name: z.string(),
  status: RunStatusSchema,
  config: RunConfigSchema,
  // What was stored, as it was: the API's rule that request paths be absolute is not the store's to re-apply.
  dataset: StoredDatasetSchema,
  init: z.string().nullable(),
  offload: ResolvedOffloadSchema.nullable(),
  runDir: z.string().min(1),
  createdAt: z.number(),
  startedAt: z.number().nullable(),
  finishedAt: z.number().nullable(),
  step: z.number().int().min(0),
  totalSteps: z.number().int().min(0),
  lastLoss: z.number().nullable(),
  tokensPerSec: z.number().nullable(),
  error: z.string().nullable(),
  // Absent (or NULL) for runs without an ESFT measurement.
  expertShares: ExpertSharesSchema.nullable().optional(),
})
const RunPatchSchema = RunRecordSchema.omit({ id: true }).partial().strict()

type RunField = keyof Omit<RunRecord, 'id'>

export const RUN_COLUMNS: Readonly<Record<RunField, string>> = {
  name: 'name',
  status: 'status',
  config: 'config',
  dataset: 'dataset',
  init: 'init',
  offload: 'offload',
  runDir: 'run_dir',
  createdAt: 'created_at',
  startedAt: 'started_at',
  finishedAt: 'finished_at',
  step: 'step',
  totalSteps: 'total_steps',
  lastLoss: 'last_loss',
  tokensPerSec: 'tokens_per_s',
  error: 'error',
  expertShares: 'expert_shares',
}
const JSON_FIELDS = new Set<RunField>(['config', 'dataset', 'offload', 'expertShares'])

function describe(error: z.ZodError): string {
  return error.issues.map((i) => `${i.path.map(String).join('.') || '(record)'}: ${i.message}`).join('; ')
}

function toColumn(field: RunField, value: unknown): SqlValue {
  if (value === undefined) return null
  return JSON_FIELDS.has(field) && value !== null ? JSON.stringify(value) : (value as SqlValue)
}

/** The run as column values in RUN_COLUMNS order, after `id`. */
export function runToRow(record: RunRecord): SqlValue[] {
  const parsed = RunRecordSchema.safeParse(record)
  if (!parsed.success) throw new StoreError(`run ${String(record.id)}: ${describe(parsed.error)}`)
  const fields = Object.keys(RUN_COLUMNS) as RunField[]
  return [parsed.data.id, ...fields.map((f) => toColumn(f, parsed.data[f]))]
}

/** The patch's fields (undefined ones skipped) as column names and values. */
export function patchToColumns(id: string, patch: Partial<Omit<RunRecord, 'id'>>): { columns: string[]; values: SqlValue[] } {
  const present = Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined))
  const parsed = RunPatchSchema.safeParse(present)
  if (!parsed.success) throw new StoreError(`run ${id}: ${describe(parsed.error)}`)
  const fields = Object.keys(parsed.data) as RunField[]
  return { columns: fields.map((f) => RUN_COLUMNS[f]), values: fields.map((f) => toColumn(f, parsed.data[f])) }
}

function parseJsonColumn(id: string, column: string, text: unknown): unknown {
  if (typeof text !== 'string') throw new StoreError(`run ${id}: stored ${column} is not JSON text`)
  try {
    return JSON.parse(text)
  } catch (e) {
    throw new StoreError(`run ${id}: stored ${column} is not valid JSON (${(e as Error).message})`)
  }
}

export function runFromRow(row: SqlRow): RunRecord {
  const id = String(row.id)
  const candidate = {
    id: row.id,
    name: row.name,
    status: row.status,
    config: parseJsonColumn(id, 'config', row.config),
    dataset: parseJsonColumn(id, 'dataset', row.dataset),
    init: row.init,
    offload: row.offload === null ? null : parseJsonColumn(id, 'offload', row.offload),
    runDir: row.run_dir,
    createdAt: row.created_at,
    startedAt: row.started_at,
    finishedAt: row.finished_at,
    step: row.step,
    totalSteps: row.total_steps,
    lastLoss: row.last_loss,
    tokensPerSec: row.tokens_per_s,
    error: row.error,
    ...(row.expert_shares == null ? {} : { expertShares: parseJsonColumn(id, 'expert_shares', row.expert_shares) }),
  }
  const parsed = RunRecordSchema.safeParse(candidate)
  if (!parsed.success) throw new StoreError(`run ${id}: stored row is invalid: ${describe(parsed.error)}`)
  return parsed.data
}
