// The New-run form's model and train fields that depend on the family or on another field: the family's features
// decide which model fields show, the load-balancing rate shows only with a selection bias to move, and the
// fields the engine gained for the real families carry their descriptions.
import { describe, expect, it } from 'vitest'

import { defaultDraft } from '../../renderer/forms/config-draft'
import { checkDraft } from '../../renderer/forms/validation'
import { field, fieldSetter, shownKeys } from './form-fixtures'

const setModel = fieldSetter('model')
const setTrain = fieldSetter('train')

describe('family-dependent fields', () => {
  it('show the key/value heads, the RoPE base and the qkv bias only where the family has them', () => {
    const gpt = setModel(defaultDraft(), 'arch', 'gpt-moe')
    const mixtral = setModel(defaultDraft(), 'arch', 'mixtral')
    for (const key of ['n_kv_heads', 'rope_theta', 'qkv_bias']) {
      expect(shownKeys('model', gpt)).not.toContain(key)
      expect(shownKeys('model', mixtral)).toContain(key)
    }
    // Fields every family takes show for both.
    for (const key of ['dense_layers', 'head_dim', 'routed_scaling_factor', 'selection_bias'])
      for (const draft of [gpt, mixtral]) expect(shownKeys('model', draft)).toContain(key)
    // An issue on a hidden field shows it anyway.
    expect(shownKeys('model', gpt, ['model.n_kv_heads'])).toContain('n_kv_heads')
  })

  it('show the load-balancing rate only with a selection bias, and refuse a rate without one by field', () => {
    const plain = defaultDraft()
    expect(shownKeys('train', plain)).not.toContain('balance_bias_rate')
    const biased = setModel(plain, 'selection_bias', true)
    expect(shownKeys('train', biased)).toContain('balance_bias_rate')
    expect(checkDraft(setTrain(biased, 'balance_bias_rate', 1e-3)).config?.train.balance_bias_rate).toBe(1e-3)
    const refused = checkDraft(setTrain(plain, 'balance_bias_rate', 1e-3))
    expect(refused.issues).toEqual([{ path: 'train.balance_bias_rate', message: 'needs model.selection_bias (the bias it moves)' }])
    expect(shownKeys('train', setTrain(plain, 'balance_bias_rate', 1e-3), ['train.balance_bias_rate'])).toContain('balance_bias_rate')
  })

  it('show the GEMM library only on the cuda backend, and refuse cublas on another by field', () => {
    const cpu = defaultDraft()
    expect(shownKeys('train', cpu)).not.toContain('gemm')
    const cuda = setTrain(cpu, 'backend', 'cuda')
    expect(shownKeys('train', cuda)).toContain('gemm')
    expect(field('train.gemm')).toMatchObject({ kind: 'enum', options: ['own', 'cublas', 'auto'] })
    expect(checkDraft(setTrain(cuda, 'gemm', 'cublas')).config?.train.gemm).toBe('cublas')
    const refused = checkDraft(setTrain(cpu, 'gemm', 'cublas'))
    expect(refused.issues).toEqual([{ path: 'train.gemm', message: 'cublas needs train.backend "cuda" (other backends have only their own GEMMs)' }])
    expect(shownKeys('train', setTrain(cpu, 'gemm', 'cublas'), ['train.gemm'])).toContain('gemm')
  })

  it('describe the fields the real families need', () => {
    for (const path of ['model.dense_layers', 'model.head_dim', 'model.routed_scaling_factor', 'model.selection_bias', 'train.balance_bias_rate'])
      expect(field(path).description, path).toBeTruthy()
    expect(field('train.balance_bias_rate')).toMatchObject({ kind: 'number', min: 0, max: 1, optional: true })
    expect(field('train.balance_bias_rate').description).toContain('1e-3')
  })
})
