// When the workbench says bf16 compute is no faster than fp32: from the engine's own flag for the backend a run
// would use, only where that backend can run here.
import { describe, expect, it } from 'vitest'

import { HardwareSchema, type Hardware } from '../../main/api/contract'
import { bf16NotFaster } from '../../renderer/forms/bf16-speed'

function machine(backends: Hardware['engineBackends']): Hardware {
  return HardwareSchema.parse({
    cpuModel: 'test cpu', cpus: 2, cpuFeatures: [], memoryBytes: 2 ** 34, freeMemoryBytes: 2 ** 33, disks: [], gpus: [],
    backends: backends.filter((b) => b.usable).map((b) => b.name), engineBackends: backends, engineError: null,
  })
}

describe('bf16 speed note', () => {
  const emulatedCpu = { name: 'cpu', usable: true, whyNot: '', kernels: 'sgemm avx2, bf16 gemm avx2_fma', bf16Native: false }
  const nativeCpu = { ...emulatedCpu, kernels: 'sgemm avx512, bf16 gemm avx512_bf16', bf16Native: true }
  const absentCuda = { name: 'cuda', usable: false, whyNot: 'no CUDA device', kernels: '', bf16Native: false }

  it('is said for a usable backend whose bf16 is not native, and only for it', () => {
    expect(bf16NotFaster(machine([emulatedCpu, absentCuda]), 'cpu')).toBe(true)
    expect(bf16NotFaster(machine([nativeCpu, absentCuda]), 'cpu')).toBe(false)
    // A backend that cannot run here gets its own refusal elsewhere, not this note.
    expect(bf16NotFaster(machine([nativeCpu, absentCuda]), 'cuda')).toBe(false)
  })

  it('says nothing before the machine is known or for a backend the engine does not list', () => {
    expect(bf16NotFaster(null, 'cpu')).toBe(false)
    expect(bf16NotFaster(machine([emulatedCpu]), 'tpu')).toBe(false)
  })
})
