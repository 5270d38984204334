// The New-run form's state: the config draft and where it came from (a preset or a checkpoint), the
// dataset, validation issues from both sides, the debounced pre-flight plan, and creating the run
// (or a queued ablation set).
import { defineStore } from 'pinia'
import { computed, ref, watch } from 'vue'

import type { RunConfig } from '../../main/api/config'
import type { DataPreview, Plan, RunSpec } from '../../main/api/contract'
import { api, ApiError, type ApiClient } from '../api'
import type { PlannedRun } from '../forms/ablation'
import { findCheckpointSource, findModelFolder, type CheckpointSource } from '../forms/checkpoint-source'
import { defaultDraft, draftFromConfig, withField, type ConfigDraft } from '../forms/config-draft'
import { allFields, runConfigForm, type FormField } from '../forms/schema-fields'
import { checkDraft, formPathOfServerIssue, placeIssues, type FieldIssue } from '../forms/validation'
import { useFinetuneMethodStore } from './finetune-method'

export const PLAN_DEBOUNCE_MS = 400

/** Fields of the spec around the config, as issue paths name them. */
export const SPEC_FIELD_PATHS = ['name', 'dataset.path', 'dataset.tokenizer', 'init'] as const

/** The Method section's fields, as issue paths name them. */
export const FINETUNE_FIELD_PATHS = [
  'finetune', 'finetune.method', 'finetune.train', 'finetune.experts', 'finetune.lora', 'finetune.lora.rank', 'finetune.lora.alpha',
  'finetune.lora.dropout', 'finetune.lora.targets', 'finetune.esft', 'finetune.esft.threshold', 'finetune.esft.sample_batches',
] as const

export type Source =
  | { kind: 'preset'; preset: string | null }
  | { kind: 'checkpoint'; path: string; from: CheckpointSource | null; looking: boolean; model?: string }

export interface Preset {
  name: string
  description: string
  config: RunConfig
}

const message = (failure: unknown) => (failure instanceof Error ? failure.message : String(failure))

export const useNewRunStore = defineStore('new-run', () => {
  const sections = runConfigForm()
  const fieldPaths = [
    ...allFields(sections).flatMap((f) => [f.path, ...(f.fields ?? []).map((n) => n.path)]),
    ...SPEC_FIELD_PATHS,
    ...FINETUNE_FIELD_PATHS,
  ]
  const method = useFinetuneMethodStore()

  const draft = ref<ConfigDraft>(defaultDraft(sections))
  const name = ref('')
  const datasetPath = ref('')
  const tokenizerPath = ref('')
  const overflow = ref<'keep' | 'truncate' | 'drop'>('keep')
  const packing = ref(true)
  const preview = ref<DataPreview | null>(null)
  const previewError = ref<string | null>(null)
  const previewing = ref(false)
  const source = ref<Source>({ kind: 'preset', preset: null })
  const presets = ref<Preset[]>([])
  const presetsError = ref<string | null>(null)

  const serverIssues = ref<FieldIssue[]>([])
  const startAttempted = ref(false)
  const submitting = ref(false)
  const submitError = ref<string | null>(null)

  const plan = ref<Plan | null>(null)
  const planError = ref<string | null>(null)
  const planPending = ref(false)

  let client: ApiClient | undefined
  const bound = () => (client ??= api())

  const check = computed(() => checkDraft(method.section ? { ...draft.value, finetune: method.section } : draft.value))
  const modelFromCheckpoint = computed(() => source.value.kind === 'checkpoint' && source.value.from !== null)

  // Required spec fields are only flagged once Start was pressed: an empty form is not an error.
  const specIssues = computed<FieldIssue[]>(() => {
    if (!startAttempted.value) return []
    const issues: FieldIssue[] = []
    if (name.value.trim() === '') issues.push({ path: 'name', message: 'give the run a name' })
    if (datasetPath.value.trim() === '') issues.push({ path: 'dataset.path', message: 'choose a data file (.txt, .jsonl or .bin)' })
    if (source.value.kind === 'checkpoint' && source.value.path.trim() === '') issues.push({ path: 'init', message: 'choose a checkpoint directory' })
    return issues
  })

  const placed = computed(() => placeIssues([...check.value.issues, ...specIssues.value, ...serverIssues.value], fieldPaths))
  const canStart = computed(() => check.value.config !== null && !submitting.value)

  function issuesFor(path: string): string[] {
    return placed.value.byField[path] ?? []
  }

  function clearServerIssues(path: string): void {
    serverIssues.value = serverIssues.value.filter((issue) => issue.path !== path && !issue.path.startsWith(`${path}.`))
  }

  function setField(field: FormField, value: unknown): void {
    draft.value = withField(draft.value, field, value)
    clearServerIssues(field.path)
  }

  function setSpecField(path: (typeof SPEC_FIELD_PATHS)[number], value: string): void {
    if (path === 'name') name.value = value
    else if (path === 'dataset.path') datasetPath.value = value
    else if (path === 'dataset.tokenizer') tokenizerPath.value = value
    else if (source.value.kind === 'checkpoint') source.value = { ...source.value, path: value, from: null }
    clearServerIssues(path)
  }

  function applyPreset(presetName: string): void {
    const preset = presets.value.find((p) => p.name === presetName)
    if (!preset) return
    draft.value = draftFromConfig(preset.config)
    method.reset(preset.config)
    source.value = { kind: 'preset', preset: preset.name }
    name.value = preset.name
    serverIssues.value = []
  }

  async function loadPresets(): Promise<void> {
    try {
      presets.value = await bound().invoke('presets.list', {})
      presetsError.value = null
    } catch (failure) {
      presetsError.value = message(failure)
    }
  }

  // The model section follows the checkpoint when one of our runs wrote it; otherwise the form keeps
  // its model fields editable and says they must match the checkpoint's shapes.
  async function useCheckpoint(path: string): Promise<void> {
    source.value = { kind: 'checkpoint', path, from: null, looking: path !== '' }
    clearServerIssues('init')
    if (path === '') return
    let from: CheckpointSource | null = null
    try {
      from = await findCheckpointSource(bound(), path)
    } catch {
      from = null
    }
    // Not one of our runs' checkpoints: a Hugging Face folder gives the model section from its config.json.
    const folder = from ? null : await findModelFolder(bound(), path)
    if (source.value.kind !== 'checkpoint' || source.value.path !== path) return
    source.value = { kind: 'checkpoint', path, from, looking: false, ...(folder ? { model: folder.label } : {}) }
    if (from) {
      draft.value = draftFromConfig(from.config)
      name.value = `${from.runName} fine-tune`
    } else if (folder) {
      draft.value = { ...draft.value, model: structuredClone({ ...folder.model }) }
      name.value = `${folder.label} fine-tune`
    }
  }

  /** Binds the client and fills the form: from ?init=<checkpoint> when given, else the first preset. */
  async function open(options: { init?: string }, apiClient: ApiClient = api()): Promise<void> {
    client = apiClient
    await loadPresets()
    if (options.init) await useCheckpoint(options.init)
    else if (source.value.kind === 'preset' && source.value.preset === null && presets.value[0]) applyPreset(presets.value[0].name)
  }

  function datasetSpec(): RunSpec['dataset'] {
    const tokenizer = tokenizerPath.value.trim()
    return {
      path: datasetPath.value.trim(),
      ...(tokenizer ? { tokenizer } : {}),
      ...(overflow.value !== 'keep' ? { overflow: overflow.value } : {}),
      ...(packing.value ? {} : { packing: false }),
    }
  }

  /** The first records as training will see them (trained and masked text, tokens, over-length ones). */
  async function loadPreview(): Promise<void> {
    previewing.value = true
    previewError.value = null
    try {
      const seqLen = Number(draft.value.train['seq_len'])
      preview.value = await bound().invoke('datasets.preview', {
        dataset: datasetSpec(),
        records: 3,
        ...(Number.isInteger(seqLen) && seqLen > 0 ? { seqLen } : {}),
      })
    } catch (failure) {
      preview.value = null
      previewError.value = message(failure)
    } finally {
      previewing.value = false
    }
  }

  function spec(config: RunConfig, runName = name.value.trim()): RunSpec {
    return {
      name: runName,
      config,
      dataset: datasetSpec(),
      ...(initPath() ? { init: initPath()! } : {}),
      // The ESFT measurement the chosen experts came from goes with the run.
      ...(config.finetune?.method === 'esft' && method.shares ? { expertShares: method.shares } : {}),
    }
  }

  function initPath(): string | null {
    return source.value.kind === 'checkpoint' && source.value.path.trim() ? source.value.path.trim() : null
  }

  /** ESFT: measures the experts' shares on the data's first batches with the base the run starts from. */
  async function measureExperts(): Promise<void> {
    const config = checkDraft(draft.value).config
    if (!config) {
      method.measureError = 'fix the marked fields first: the measurement runs this model'
      return
    }
    if (datasetPath.value.trim() === '') {
      method.measureError = 'choose a data file first: the measurement runs over its first batches'
      return
    }
    await method.measure(bound(), config, datasetSpec(), initPath() ?? undefined)
  }

  function acceptFailure(failure: unknown): void {
    if (failure instanceof ApiError && failure.issues.length > 0) {
      serverIssues.value = failure.issues.map((issue) => ({ path: formPathOfServerIssue(issue.path), message: issue.message }))
      submitError.value = 'The host refused the run; see the marked fields.'
    } else submitError.value = message(failure)
  }

  /** Creates the run; its id, or null when the form or the host refused it (issues then sit on their fields). */
  async function start(): Promise<string | null> {
    startAttempted.value = true
    submitError.value = null
    const config = check.value.config
    if (!config || specIssues.value.length > 0) return null
    submitting.value = true
    try {
      return (await bound().invoke('runs.create', { spec: spec(config) })).id
    } catch (failure) {
      acceptFailure(failure)
      return null
    } finally {
      submitting.value = false
    }
  }

  const queued = ref<{ name: string; id: string }[]>([])

  /** Creates the runs one by one (the host queues them); stops at the first refusal. The ids created, in order. */
  async function queue(runs: PlannedRun[]): Promise<string[] | null> {
    startAttempted.value = true
    submitError.value = null
    queued.value = []
    if (specIssues.value.length > 0 || runs.length === 0 || runs.some((r) => r.issues.length > 0)) return null
    submitting.value = true
    try {
      for (const run of runs) {
        const created = await bound().invoke('runs.create', { spec: spec(run.config, run.name) })
        queued.value = [...queued.value, { name: run.name, id: created.id }]
      }
      return queued.value.map((q) => q.id)
    } catch (failure) {
      acceptFailure(failure)
      return null
    } finally {
      submitting.value = false
    }
  }

  let planTimer: ReturnType<typeof setTimeout> | undefined
  let planRequest = 0

  async function refreshPlan(config: RunConfig): Promise<void> {
    const request = ++planRequest
    try {
      const answer = await bound().invoke('planner.plan', { config, ...(method.frozenBf16 ? { frozenBf16: true } : {}) })
      if (request !== planRequest) return
      plan.value = answer
      planError.value = null
    } catch (failure) {
      if (request === planRequest) planError.value = message(failure)
    } finally {
      if (request === planRequest) planPending.value = false
    }
  }

  // Each edit restarts the wait, so typing a number asks the planner once, for the final value.
  watch(
    () => (check.value.config ? `${JSON.stringify(check.value.config)}|${method.frozenBf16}` : null),
    (key) => {
      clearTimeout(planTimer)
      const config = check.value.config
      if (key === null || !config) {
        planRequest++
        planPending.value = false
        return
      }
      planPending.value = true
      planTimer = setTimeout(() => void refreshPlan(config), PLAN_DEBOUNCE_MS)
    },
    { immediate: true },
  )

  return {
    sections,
    draft,
    name,
    datasetPath,
    tokenizerPath,
    overflow,
    packing,
    preview,
    previewError,
    previewing,
    loadPreview,
    measureExperts,
    source,
    presets,
    presetsError,
    check,
    placed,
    canStart,
    modelFromCheckpoint,
    serverIssues,
    submitting,
    submitError,
    queued,
    plan,
    planError,
    planPending,
    issuesFor,
    setField,
    setSpecField,
    applyPreset,
    useCheckpoint,
    open,
    start,
    queue,
  }
})
