// The New-run form's placement section: generated from the schema like the rest, only the fields the device
// count and the policy use shown.
import { describe, expect, it } from 'vitest'

import { defaultDraft, draftFromConfig, withField } from '../../renderer/forms/config-draft'
import { rangeText } from '../../renderer/forms/schema-fields'
import { sectionOff } from '../../renderer/forms/shown-fields'
import { checkDraft } from '../../renderer/forms/validation'
import { tinyConfig } from './compare-fixtures'
import { type Draft, field, fieldSetter, formSection, shownKeys } from './form-fixtures'

const section = () => formSection('placement')
const withPlacement = fieldSetter('placement')
const keys = (draft: Draft, issues?: string[]) => shownKeys('placement', draft, issues)
const DEFAULTS = { devices: 1, policy: 'static', lambda: 1.3, alpha: 1.1, min_tokens: 32, greedy_split: true, device_budget_bytes: null, threads_per_device: null }

describe('placement fields', () => {
  it('come from the schema under their own title, with kinds, defaults, ranges and help', () => {
    expect(section().title).toBe('Placement (devices)')
    expect(field('placement.devices')).toMatchObject({ kind: 'integer', min: 1, max: 1024, defaultValue: 1 })
    expect(field('placement.policy')).toMatchObject({ kind: 'enum', options: ['static', 'greedy', 'least-loaded'], defaultValue: 'static' })
    expect(field('placement.lambda')).toMatchObject({ kind: 'number', min: 1, max: 10, defaultValue: 1.3 })
    expect(field('placement.alpha')).toMatchObject({ kind: 'number', min: 1, max: 10, defaultValue: 1.1 })
    expect(field('placement.min_tokens')).toMatchObject({ kind: 'integer', min: 1, defaultValue: 32 })
    expect(field('placement.greedy_split')).toMatchObject({ kind: 'boolean', defaultValue: true })
    expect(field('placement.device_budget_bytes')).toMatchObject({ kind: 'nullable-number', integer: true, exclusiveMin: 0, defaultValue: null, unit: 'bytes' })
    expect(field('placement.threads_per_device')).toMatchObject({ kind: 'nullable-number', integer: true, min: 1, max: 256, defaultValue: null })
    expect(rangeText(field('placement.devices'))).toBe('1 … 1024')
    expect(rangeText(field('placement.threads_per_device'))).toBe('1 … 256')
    expect(section().fields.every((f) => f.description)).toBe(true)
  })

  it('default to one device, and a default draft is a valid config that places nothing', () => {
    const draft = defaultDraft()
    expect(draft.placement).toEqual(DEFAULTS)
    expect(checkDraft(draft).config?.placement).toEqual(DEFAULTS)
    expect(checkDraft(draftFromConfig(tinyConfig)).config?.placement).toEqual(DEFAULTS)
  })

  it('show the policy only for more than one device, and LLEP’s knobs only for least-loaded', () => {
    const one = defaultDraft()
    expect(keys(one)).toEqual(['devices'])
    expect(keys(withPlacement(one, 'policy', 'least-loaded'))).toEqual(['devices'])
    const four = withPlacement(one, 'devices', 4)
    const devices = ['device_budget_bytes', 'threads_per_device']
    expect(keys(four)).toEqual(['devices', 'policy', ...devices])
    expect(keys(withPlacement(four, 'policy', 'greedy'))).toEqual(['devices', 'policy', 'greedy_split', ...devices])
    expect(keys(withPlacement(four, 'policy', 'least-loaded'))).toEqual(['devices', 'policy', 'lambda', 'alpha', 'min_tokens', ...devices])
    // A hidden field with an issue shows anyway, and the issue is the schema's range.
    const stale = withPlacement(four, 'lambda', 0.5)
    expect(checkDraft(stale).issues.map((i) => i.path)).toEqual(['placement.lambda'])
    expect(keys(stale, ['placement.lambda'])).toEqual(['devices', 'policy', 'lambda', ...devices])
  })

  it('show the devices’ budget and threads for one device when a pipeline runs on it, and say what off means only then', () => {
    const one = defaultDraft()
    expect(sectionOff('placement', one)).toBe(true)
    const piped = withField(one, { section: 'pipeline', key: 'partitions' }, 4)
    expect(keys(piped)).toEqual(['devices', 'device_budget_bytes', 'threads_per_device'])
    expect(sectionOff('placement', piped)).toBe(false)
    expect(sectionOff('placement', withPlacement(one, 'devices', 2))).toBe(false)
  })

  it('validate the device fields with the schema’s messages, and name placement.devices for offload with devices', () => {
    const four = withPlacement(defaultDraft(), 'devices', 4)
    expect(checkDraft(withPlacement(four, 'device_budget_bytes', 0)).issues).toEqual([{ path: 'placement.device_budget_bytes', message: 'must be a positive number of bytes' }])
    expect(checkDraft(withPlacement(four, 'threads_per_device', 300)).issues.map((i) => i.path)).toEqual(['placement.threads_per_device'])
    const offloaded = withField(withField(four, { section: 'offload', key: 'mode' }, 'host'), { section: 'offload', key: 'expert_slots' }, 2)
    const issues = checkDraft(offloaded).issues
    expect(issues.map((i) => i.path)).toEqual(['placement.devices'])
    expect(issues[0]!.message).toMatch(/^host offload: experts run on several devices or pipelined only without offload for now/)
  })
})
