// Every metric the API serves has a chart label, the engine's fields from the field table.
import { describe, expect, it } from 'vitest'

import { ScalarMetricSchema } from '../../main/api/contract'
import { STEP_FIELDS } from '../../main/api/step-fields'
import { METRIC_LABELS } from '../../renderer/charts/compare-overlay'
import { OFFLOAD_METRICS } from '../../renderer/charts/offload'

describe('metric labels', () => {
  it('label every API metric, each engine field with its table label', () => {
    for (const m of ScalarMetricSchema.options) expect(METRIC_LABELS[m], m).toBeTruthy()
    for (const f of STEP_FIELDS) if (f.name !== 'step') expect(METRIC_LABELS[f.name]).toBe(f.label)
    expect(METRIC_LABELS.ssd_read_ms).toBe('SSD reads (ms)')
    expect(METRIC_LABELS.tokens_per_s).toBe('Tokens/s')
  })

  it('the Run view asks for ssd_read_ms with the other offload metrics', () => {
    expect(OFFLOAD_METRICS).toContain('ssd_read_ms')
  })
})
