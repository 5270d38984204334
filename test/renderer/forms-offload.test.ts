// The New-run form's offload section: generated from the schema like the rest, budgets typed in binary
// units, each nullable field saying what null means, only the fields the mode uses shown, and the
// pre-flight panel's mode and capacity lines.
import { describe, expect, it } from 'vitest'

import type { Plan } from '../../main/api/contract'
import { bytesInputText, parseBytes } from '../../renderer/forms/bytes'
import { defaultDraft, withField } from '../../renderer/forms/config-draft'
import { nullChoice } from '../../renderer/forms/null-choice'
import { allFields, rangeText, runConfigForm } from '../../renderer/forms/schema-fields'
import { shownFields } from '../../renderer/forms/shown-fields'
import { capacityLines, modeLine, tierBars } from '../../renderer/forms/tier-bar'
import { checkDraft } from '../../renderer/forms/validation'
import { planOf } from './compare-fixtures'
import { type Draft, field, fieldSetter, shownKeys } from './form-fixtures'


describe('offload fields', () => {
  it('come from the schema with their kinds, defaults and units', () => {
    expect(field('offload.mode')).toMatchObject({ kind: 'enum', options: ['auto', 'none', 'host', 'ssd'], defaultValue: 'none' })
    expect(field('offload.device_budget_bytes')).toMatchObject({ kind: 'nullable-number', unit: 'bytes', defaultValue: null })
    expect(field('offload.expert_slots')).toMatchObject({ kind: 'nullable-number', unit: null, integer: true, min: 1 })
    expect(field('offload.lookahead')).toMatchObject({ kind: 'integer', min: 0, max: 64, defaultValue: 1 })
    expect(field('offload.optimizer').description).toContain('one-step-stale')
    expect(rangeText(field('offload.device_budget_bytes'))).toBe('> 0')
  })

  it('say what null means for every nullable field', () => {
    const nullable = allFields().filter((f) => f.kind === 'nullable-number')
    expect(nullable.filter((f) => nullChoice(f).label === 'null').map((f) => f.path)).toEqual([])
    expect(nullChoice(field('model.capacity_factor'))).toMatchObject({ label: 'dropless (null)', start: 1 })
    expect(nullChoice(field('offload.device_budget_bytes')).start).toBe(2 ** 30)
  })

  it('default to resident, and a resident draft is a valid config with an offload section', () => {
    const draft = defaultDraft()
    expect(draft.offload).toMatchObject({ mode: 'none', lookahead: 1, pin_fraction: 0.25, cache_policy: 'lru' })
    expect(checkDraft(draft).config?.offload?.mode).toBe('none')
  })

  it('show what the mode uses', () => {
    const keys = (draft: Draft, issues?: string[]) => shownKeys('offload', draft, issues)
    const set = fieldSetter('offload')
    const resident = defaultDraft()
    expect(keys(resident)).toEqual(['mode'])
    const host = set(resident, 'mode', 'host')
    expect(keys(host)).toEqual([
      'mode', 'device_budget_bytes', 'expert_slots', 'lookahead', 'pin_fraction', 'pin_policy', 'optimizer', 'optimizer_overlap', 'copy_stream',
      'host_budget_bytes',
    ])
    expect(keys(set(host, 'mode', 'ssd'))).toContain('cache_experts')
    expect(keys(set(host, 'mode', 'ssd'))).not.toContain('lfu_decay')
    expect(keys(set(set(host, 'mode', 'auto'), 'cache_policy', 'lfu'))).toContain('lfu_decay')
    // An issue on a field the mode hides shows the field anyway.
    expect(keys(resident, ['offload.lfu_decay'])).toEqual(['mode', 'lfu_decay'])
    // A section showing every field gives its own list (mixtral's model section uses every field).
    expect(shownFields(runConfigForm()[0]!, fieldSetter('model')(resident, 'arch', 'mixtral'), () => false)).toBe(runConfigForm()[0]!.fields)
  })

  it('puts the engine’s refusals on the offload fields', () => {
    const draft = withField(defaultDraft(), { section: 'offload', key: 'mode' }, 'host')
    expect(checkDraft(draft).issues).toEqual([{ path: 'offload.expert_slots', message: 'host offload needs expert_slots or device_budget_bytes' }])
  })
})

describe('byte inputs', () => {
  it('read binary units, plain bytes and shorthands', () => {
    expect(parseBytes('2 GiB')).toBe(2 * 2 ** 30)
    expect(parseBytes('512MiB')).toBe(512 * 2 ** 20)
    expect(parseBytes('1.5 gib')).toBe(1.5 * 2 ** 30)
    expect(parseBytes('64k')).toBe(65_536)
    expect(parseBytes('1048576')).toBe(2 ** 20)
    expect(parseBytes('12 B')).toBe(12)
    expect(parseBytes('two GiB')).toBeNull()
    expect(parseBytes('2 GB/s')).toBeNull()
  })

  it('show a count in the largest unit that writes it exactly', () => {
    expect(bytesInputText(2 ** 31)).toBe('2 GiB')
    expect(bytesInputText(1.5 * 2 ** 30)).toBe('1.5 GiB')
    expect(bytesInputText(600_064)).toBe('586 KiB')
    expect(bytesInputText(600_000)).toBe('600000')
    expect(bytesInputText(1000)).toBe('1000')
    expect(parseBytes(bytesInputText(123_456_789))).toBe(123_456_789)
  })
})

describe('pre-flight lines', () => {
  const plan = (over: Partial<Plan>): Plan => ({ ...planOf(2 ** 20), ...over })

  it('say what auto chose, and what the offloaded experts get', () => {
    expect(modeLine(plan({ requested: 'auto', mode: 'host' }))).toBe('auto → host: experts offloaded to host memory')
    expect(modeLine(plan({ requested: 'none', mode: 'none' }))).toBe('none: resident (no offload)')
    expect(capacityLines(plan({ slots: 1, cacheExperts: 6 }))).toEqual(['1 expert slot on the device', '6 host cache entries'])
    expect(capacityLines(plan({}))).toEqual([])
  })

  it('bar the device always, and the host and SSD when they hold bytes', () => {
    expect(tierBars(planOf(2 ** 20)).map((b) => b.tier)).toEqual(['device'])
    const ssd = planOf(2 ** 20)
    ssd.tiers = ssd.tiers.map((t) => ({ ...t, total: t.tier === 'ssd' ? 5 : t.total }))
    expect(tierBars(ssd).map((b) => b.tier)).toEqual(['device', 'ssd'])
  })
})
