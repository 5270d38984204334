// Ablation sets, ES-MoE table-3 style: from one config, runs that each switch one component off, or
// sweep one numeric knob over listed values. Components are data: offload, pinning and placement
// knobs join this list as the config grows them, and the builder, preview and tests pick them up.
import type { RunConfig } from '../../main/api/config'
import { checkDraft, type FieldIssue } from './validation'
import { allFields, type FormField } from './schema-fields'

export interface AblationComponent {
  id: string
  /** What the run without it is called: "no aux loss". */
  label(config: RunConfig): string
  /** The config fields the switch may touch (one component can span fields, e.g. the shared expert and its gate). */
  fields: string[]
  /** Why this config has nothing to switch off, or null when it does. */
  unavailable(config: RunConfig): string | null
  switchOff(config: RunConfig): RunConfig
}

const model = (config: RunConfig, change: Partial<RunConfig['model']>): RunConfig => ({
  ...config,
  model: { ...config.model, ...change },
})

// The offload ablations (ES-MoE's pipelining, pinning and overlapped optimizer; MoESys's prefetch) need an offloaded config.
type Offload = NonNullable<RunConfig['offload']>
const offload = (config: RunConfig, change: Partial<Offload>): RunConfig => ({ ...config, offload: { ...config.offload!, ...change } })
const offloadOff = (config: RunConfig, already: (o: Offload) => boolean, what: string): string | null => {
  if (!config.offload || config.offload.mode === 'none') return 'this config keeps every expert resident'
  return already(config.offload) ? what : null
}

export const ABLATION_COMPONENTS: readonly AblationComponent[] = [
  {
    id: 'aux-loss',
    label: () => 'no aux loss',
    fields: ['model.aux_loss_coef'],
    unavailable: (c) => (c.model.aux_loss_coef === 0 ? 'the aux loss is already off (coefficient 0)' : null),
    switchOff: (c) => model(c, { aux_loss_coef: 0 }),
  },
  {
    id: 'z-loss',
    label: () => 'no z-loss',
    fields: ['model.z_loss_coef'],
    unavailable: (c) => (c.model.z_loss_coef === 0 ? 'the z-loss is already off (coefficient 0)' : null),
    switchOff: (c) => model(c, { z_loss_coef: 0 }),
  },
  {
    // Dropless is the default, so its counterpart is capacity-padded routing at factor 1.0, and vice versa.
    id: 'capacity',
    label: (c) => (c.model.capacity_factor === null ? 'capacity 1.0' : 'dropless'),
    fields: ['model.capacity_factor'],
    unavailable: () => null,
    switchOff: (c) => model(c, { capacity_factor: c.model.capacity_factor === null ? 1 : null }),
  },
  {
    id: 'shared-expert',
    label: () => 'no shared expert',
    fields: ['model.shared_expert_d_ff', 'model.shared_expert_gate'],
    unavailable: (c) => (c.model.shared_expert_d_ff === 0 ? 'this config has no shared expert' : null),
    switchOff: (c) => model(c, { shared_expert_d_ff: 0, shared_expert_gate: false }),
  },
  {
    id: 'residual-mlp',
    label: () => 'no residual MLP',
    fields: ['model.residual_mlp'],
    unavailable: (c) => (c.model.residual_mlp ? null : 'this config has no residual MLP'),
    switchOff: (c) => model(c, { residual_mlp: false }),
  },
  {
    id: 'renormalize',
    label: () => 'no renormalize',
    fields: ['model.renormalize'],
    unavailable: (c) => (c.model.renormalize ? null : 'top-k weights are already not renormalised'),
    switchOff: (c) => model(c, { renormalize: false }),
  },
  {
    id: 'pinning',
    label: () => 'no pinning',
    fields: ['offload.pin_fraction'],
    unavailable: (c) => offloadOff(c, (o) => o.pin_fraction === 0 || o.pin_policy === 'none', 'no expert is pinned already'),
    switchOff: (c) => offload(c, { pin_fraction: 0 }),
  },
  {
    id: 'lookahead',
    label: () => 'no upload pipelining',
    fields: ['offload.lookahead'],
    unavailable: (c) => offloadOff(c, (o) => o.lookahead === 0, 'uploads are already not pipelined (lookahead 0)'),
    switchOff: (c) => offload(c, { lookahead: 0 }),
  },
  {
    id: 'optimizer-overlap',
    label: () => 'no optimizer overlap',
    fields: ['offload.optimizer_overlap'],
    unavailable: (c) => offloadOff(c, (o) => !o.optimizer_overlap, 'expert updates already wait for the step'),
    switchOff: (c) => offload(c, { optimizer_overlap: false }),
  },
  {
    id: 'prefetch',
    label: () => 'no prefetch',
    fields: ['offload.prefetch'],
    unavailable: (c) =>
      offloadOff(c, (o) => o.mode !== 'ssd' && o.mode !== 'auto', 'only the SSD tier prefetches') ??
      (c.offload!.prefetch ? null : 'prefetch is already off'),
    switchOff: (c) => offload(c, { prefetch: false }),
  },
]

export interface PlannedRun {
  name: string
  config: RunConfig
  /** Client-side problems of this variant (e.g. top_k above a swept expert count); such a set is not queued. */
  issues: FieldIssue[]
}

function planned(name: string, config: RunConfig): PlannedRun {
  return { name, config, issues: checkDraft(config).issues }
}

export const runName = (base: string, variant: string) => `${base} · ${variant}`

/** The baseline (optional) and one run per chosen component, each with only that component off. */
export function componentAblation(base: RunConfig, baseName: string, componentIds: readonly string[], includeBaseline: boolean): PlannedRun[] {
  const runs = includeBaseline ? [planned(runName(baseName, 'baseline'), base)] : []
  for (const component of ABLATION_COMPONENTS) {
    if (!componentIds.includes(component.id) || component.unavailable(base) !== null) continue
    runs.push(planned(runName(baseName, component.label(base)), component.switchOff(base)))
  }
  return runs
}

/** Numeric fields a sweep can vary (a number-or-list field sweeps a single number for every layer). */
export function sweepableFields(fields: FormField[] = allFields()): FormField[] {
  return fields.filter((f) => f.kind === 'integer' || f.kind === 'number' || f.kind === 'number-or-list')
}

/** One run per value, named "tiny · top_k=1". */
export function sweepRuns(base: RunConfig, baseName: string, field: FormField, values: readonly number[]): PlannedRun[] {
  return values.map((value) => {
    const section = { ...base[field.section], [field.key]: value }
    return planned(runName(baseName, `${field.key}=${value}`), { ...base, [field.section]: section } as RunConfig)
  })
}

/** Problems with the typed sweep values themselves: duplicates, or values outside the field's range. */
export function sweepValueProblems(field: FormField, values: readonly number[]): string[] {
  const problems: string[] = []
  if (new Set(values).size !== values.length) problems.push('a value is listed twice')
  for (const v of values) {
    if (field.integer && !Number.isInteger(v)) problems.push(`${v} is not a whole number`)
    if (field.min !== null && v < field.min) problems.push(`${v} is below ${field.min}`)
    if (field.exclusiveMin !== null && v <= field.exclusiveMin) problems.push(`${v} must exceed ${field.exclusiveMin}`)
    if (field.max !== null && v > field.max) problems.push(`${v} is above ${field.max}`)
  }
  return problems
}
