// The config diff of Compare: configs flattened to dotted paths (model.top_k), keeping only the paths
// whose values are not the same in every run. A config without an offload section is resident, one
// without a routing skew is routed by its router, one without a placement runs on one device, and one without
// a pipeline runs its experts in one partition, so each compares as that section's defaults; the finetune
// section compares by its resolved method (finetune-flat.ts), none being full training.
import { flattenFinetune } from './finetune-flat'
import { OffloadConfigSchema, PipelineConfigSchema, PlacementConfigSchema, RoutingSkewConfigSchema, type RunConfig } from '../../../main/api/config'

export type FlatConfig = Record<string, string>

const show = (value: unknown): string => (Array.isArray(value) ? `[${value.join(', ')}]` : value === null ? 'null' : String(value))

export function flattenConfig(config: RunConfig): FlatConfig {
  const flat: FlatConfig = {}
  const sections = {
    model: config.model,
    train: config.train,
    offload: config.offload ?? OffloadConfigSchema.parse({}),
    routing_skew: config.routing_skew ?? RoutingSkewConfigSchema.parse({}),
    placement: config.placement ?? PlacementConfigSchema.parse({}),
    pipeline: config.pipeline ?? PipelineConfigSchema.parse({}),
  }
  for (const [section, fields] of Object.entries(sections))
    for (const [key, value] of Object.entries(fields)) if (value !== undefined) flat[`${section}.${key}`] = show(value)
  return { ...flat, ...flattenFinetune(config) }
}

export interface DiffRow {
  path: string
  /** One per run, in the order given; null where the run leaves the field unset. */
  values: (string | null)[]
}

export function configDiff(configs: readonly RunConfig[]): DiffRow[] {
  const flats = configs.map(flattenConfig)
  const paths = [...new Set(flats.flatMap((f) => Object.keys(f)))]
  return paths
    .map((path) => ({ path, values: flats.map((f) => f[path] ?? null) }))
    .filter((row) => new Set(row.values).size > 1)
}
