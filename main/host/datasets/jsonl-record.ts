// One JSONL line: {"text": ...} trains on every token; {"prompt": ..., "completion": ...} trains on
// the completion only. Errors name the file, the 1-based line and the field.
import { DatasetError } from './errors'

export type JsonlRecord = { kind: 'text'; text: string } | { kind: 'pair'; prompt: string; completion: string }

function typeName(v: unknown): string {
  if (v === null) return 'null'
  if (Array.isArray(v)) return 'an array'
  return typeof v === 'object' ? 'an object' : `a ${typeof v}`
}

function stringField(file: string, line: number, record: Record<string, unknown>, field: string): string {
  if (!(field in record)) throw new DatasetError(file, 'is missing', line, field)
  const v = record[field]
  if (typeof v !== 'string') throw new DatasetError(file, `is ${typeName(v)}, expected a string`, line, field)
  return v
}

export function parseJsonlRecord(file: string, line: number, source: string): JsonlRecord {
  let value: unknown
  try {
    value = JSON.parse(source)
  } catch (e) {
    throw new DatasetError(file, `is not valid JSON: ${(e as Error).message}`, line)
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new DatasetError(file, `is ${typeName(value)}, expected an object with "text" or "prompt" and "completion"`, line)
  const record = value as Record<string, unknown>
  if ('prompt' in record || 'completion' in record)
    return {
      kind: 'pair',
      prompt: stringField(file, line, record, 'prompt'),
      completion: stringField(file, line, record, 'completion'),
    }
  if ('text' in record) return { kind: 'text', text: stringField(file, line, record, 'text') }
  throw new DatasetError(file, 'has neither "text" nor "prompt" and "completion"', line)
}
