// When the New-run pre-flight says train.threads is more than the machine's CPUs.
import { describe, expect, it } from 'vitest'

import { HardwareSchema, type Hardware } from '../../main/api/contract'
import { threadsOverCpus } from '../../renderer/forms/threads-check'

const machine = (cpus: number): Hardware =>
  HardwareSchema.parse({
    cpuModel: 'test cpu', cpus, cpuFeatures: [], memoryBytes: 2 ** 34, freeMemoryBytes: 2 ** 33, disks: [], gpus: [],
    backends: ['cpu'], engineBackends: [], engineError: null,
  })

describe('threads over CPUs note', () => {
  it('names the threads, the CPUs and the most that helps, only past the CPUs', () => {
    expect(threadsOverCpus(machine(2), 64)).toBe(
      "train.threads 64 is more than this machine's 2 logical CPUs: the threads would take turns and every step " +
        'would wait for the last of them. 2 is the most that helps.',
    )
    expect(threadsOverCpus(machine(2), 3)).toContain('train.threads 3 is more than')
    expect(threadsOverCpus(machine(2), 2)).toBeNull()
    expect(threadsOverCpus(machine(16), 8)).toBeNull()
  })

  it('says nothing before the machine is known or while the field is not a whole number', () => {
    expect(threadsOverCpus(null, 64)).toBeNull()
    expect(threadsOverCpus(machine(2), undefined)).toBeNull()
    expect(threadsOverCpus(machine(2), '64')).toBeNull()
    expect(threadsOverCpus(machine(2), 2.5)).toBeNull()
  })
})
