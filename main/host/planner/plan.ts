// Pre-flight memory plan of a run: bytes per tier (parameters, gradients, AdamW moments, saved
// activations, backward scratch) for the config's offload mode, mirroring the engine's bookings, and
// whether it fits. "auto" takes the first of resident, host and SSD that fits; when none does, the
// explanation names the tier that is short, by how many bytes, and the smallest budget that would fit.
import { OffloadConfigSchema, type OffloadConfig, type RunConfig } from '../../api/config'
import type { Plan } from '../../api/contract'
import { binaryBytes, exactBytes, planFormulas } from './formulas'
import { finetuneVerdict } from './finetune-plan'
import { countParams } from './param-count'
import {
  bf16Staging, deviceFixed, emptyTier, hostTierOfHostMode, hostTierOfSsdMode, offloadedDevice, residentDevice, sizesOf,
  sideBytes, slotBytes, slotsFor, ssdTier, type Sizes, type TierBytes,
} from './tiers'

/** What the machine offers when the config sets no budget (ssd: free disk, null when unknown). */
export interface Budgets {
  device: number
  host: number
  ssd: number | null
}

interface Shortage {
  tier: TierBytes['tier']
  /** The smallest budget of this tier that would fit. */
  needed: number
  budget: number
  what: string
}

interface Candidate {
  mode: Plan['mode']
  tiers: TierBytes[]
  slots: number | null
  /** The experts compute on their host copies in place; slots hold gradients alone (offload.copy_stream). */
  mapped: boolean
  cacheExperts: number | null
  short: Shortage[]
  /** What no budget fixes (a setting the engine refuses). */
  problems: string[]
}

// Auto wants pipelining: one slot computing while the next uploads.
const AUTO_MIN_SLOTS = 2

const slotsText = (n: number, mapped = false) =>
  `${n} expert slot${n === 1 ? '' : 's'}${mapped ? ' (gradients only: the experts compute on their host copies)' : ''}`

// As the engine chooses (ExpertOffload::choose_copy_stream): "mapped" where asked, and for the SSD tier under auto
// when the backend computes in host memory and the cache holds the lookahead window beside the workers' entries.
const mappedEntries = (o: OffloadConfig, experts: number) => Math.min(experts, Math.max(1, o.lookahead) + 3)
function mappedSlots(o: OffloadConfig, backend: string, ssdEntries: number | null, experts: number): boolean {
  if (o.copy_stream === 'mapped') return true
  return o.copy_stream === 'auto' && ssdEntries !== null && backend === 'cpu' && ssdEntries >= mappedEntries(o, experts)
}
function mappedProblems(o: OffloadConfig, backend: string, ssdEntries: number | null, experts: number): string[] {
  if (o.copy_stream !== 'mapped') return []
  if (backend !== 'cpu') return [`offload.copy_stream "mapped" computes on the experts’ host copies, which the ${backend} backend cannot`]
  if (ssdEntries !== null && ssdEntries < mappedEntries(o, experts))
    return [`offload.cache_experts ${ssdEntries} is below the ${mappedEntries(o, experts)} entries "mapped" holds (lookahead + 3)`]
  return []
}

// The SSD tier's cache holds what the copy, optimizer and prefetch workers and the compute thread use
// (the engine's minimum of 4), and the uploads in flight ahead of the compute thread.
const minCacheEntries = (o: OffloadConfig) => Math.max(o.lookahead + 2, 4)

function resident(s: Sizes, b: Budgets): Candidate {
  const device = residentDevice(s, b.device)
  const short: Shortage[] = device.total > b.device
    ? [{ tier: 'device', needed: device.total, budget: b.device, what: 'every parameter’s state, activations and buffers' }]
    : []
  return { mode: 'none', tiers: [device, emptyTier('host', b.host), emptyTier('ssd', b.ssd)], slots: null, mapped: false, cacheExperts: null, short, problems: [] }
}

function offloadedDeviceTier(s: Sizes, o: OffloadConfig, b: Budgets, minSlots: number, mapped: boolean): { device: TierBytes; slots: number; short: Shortage[] } {
  const slots = o.expert_slots !== null ? Math.min(o.expert_slots, s.experts) : slotsFor(s, b.device, mapped)
  const device = offloadedDevice(s, slots, b.device, mapped)
  const least = Math.min(minSlots, s.experts)
  if (o.expert_slots === null && slots < least) {
    const what = `the dense state, activations, buffers and ${slotsText(least, mapped)}`
    return { device, slots, short: [{ tier: 'device', needed: deviceFixed(s) + least * slotBytes(s, mapped), budget: b.device, what }] }
  }
  const what = `the dense state, activations, buffers and ${slotsText(slots, mapped)}`
  return { device, slots, short: device.total > b.device ? [{ tier: 'device', needed: device.total, budget: b.device, what }] : [] }
}

function hostMode(s: Sizes, o: OffloadConfig, b: Budgets, minSlots: number, backend: string): Candidate {
  const mapped = mappedSlots(o, backend, null, s.experts)
  const { device, slots, short } = offloadedDeviceTier(s, o, b, minSlots, mapped)
  const delayed = o.optimizer === 'delayed'
  const host = hostTierOfHostMode(s, delayed, b.host, bf16Staging(s, backend, mapped))
  if (host.total > b.host) {
    const what = `every expert’s weights, gradient and AdamW moments${delayed ? ' and pending gradients' : ''}`
    short.push({ tier: 'host', needed: host.total, budget: b.host, what })
  }
  const problems = mappedProblems(o, backend, null, s.experts)
  return { mode: 'host', tiers: [device, host, emptyTier('ssd', b.ssd)], slots, mapped, cacheExperts: null, short, problems }
}

function ssdMode(s: Sizes, o: OffloadConfig, b: Budgets, minSlots: number, backend: string): Candidate {
  // The engine checks the entries asked for (or the budget holds), then allocates at most one per expert.
  const asked = o.cache_experts ?? Math.floor(Math.max(0, b.host - sideBytes(s)) / s.record)
  const entries = Math.min(asked, s.experts)
  const mapped = mappedSlots(o, backend, entries, s.experts)
  const { device, slots, short } = offloadedDeviceTier(s, o, b, minSlots, mapped)
  const host = hostTierOfSsdMode(s, entries, b.host, bf16Staging(s, backend, mapped))
  const least = minCacheEntries(o)
  const problems = mappedProblems(o, backend, entries, s.experts)
  if (asked >= least && host.total > b.host) short.push({ tier: 'host', needed: host.total, budget: b.host, what: `${entries} cache entries` })
  else if (asked < least && o.cache_experts === null)
    short.push({ tier: 'host', needed: sideBytes(s) + least * s.record, budget: b.host, what: `${least} cache entries (max(lookahead + 2, 4))` })
  else if (asked < least) problems.push(`offload.cache_experts ${asked} is below the ${least} entries the SSD tier needs (max(lookahead + 2, 4))`)
  const ssd = ssdTier(s, b.ssd)
  if (b.ssd !== null && ssd.total > b.ssd)
    short.push({ tier: 'ssd', needed: ssd.total, budget: b.ssd, what: 'every expert’s record' })
  return { mode: 'ssd', tiers: [device, host, ssd], slots, mapped, cacheExperts: entries, short, problems }
}

const shortText = (x: Shortage) =>
  `the ${x.tier} tier is short by ${exactBytes(x.needed - x.budget)}: ${x.what} need ${binaryBytes(x.needed)} and the ` +
  `${x.tier} budget is ${binaryBytes(x.budget)}; a ${x.tier} budget of at least ${exactBytes(x.needed)} would fit`

const tierOf = (c: Candidate, name: TierBytes['tier']) => c.tiers.find((t) => t.tier === name)!
const of = (t: TierBytes) => `${binaryBytes(t.total)} of ${binaryBytes(t.budget ?? 0)}`

function fitText(c: Candidate, s: Sizes): string {
  const device = tierOf(c, 'device')
  if (c.mode === 'none') return `resident: all ${binaryBytes(device.total)} fit in the device budget of ${binaryBytes(device.budget ?? 0)}`
  const onDevice = `the device holds the dense state, activations, buffers and ${slotsText(c.slots ?? 0, c.mapped)} (${of(device)})`
  if (c.mode === 'host') return `host: ${onDevice}; the host holds every expert’s state (${of(tierOf(c, 'host'))})`
  const ssd = tierOf(c, 'ssd')
  return `ssd: ${onDevice}; the host caches ${c.cacheExperts} of ${s.experts} experts (${of(tierOf(c, 'host'))}); ` +
    `the SSD holds every expert’s state (${binaryBytes(ssd.total)}${ssd.budget !== null ? ` of ${binaryBytes(ssd.budget)}` : ''})`
}

const fitsIn = (c: Candidate) => c.short.length === 0 && c.problems.length === 0

function explicitText(c: Candidate, s: Sizes): string {
  if (fitsIn(c)) return fitText(c, s)
  const hint = c.mode === 'none' ? `; or offload the experts (offload.mode auto): their state is ${binaryBytes(s.allExperts + 3 * s.allExpertsTrained)}` : ''
  return `${c.mode}: does not fit: ${[...c.problems, ...c.short.map(shortText)].join('; ')}${hint}`
}

// Resident, else host, else SSD (never with delayed updates); when nothing fits, the first shortage
// that every remaining option shares: the device, else the host, else the SSD.
function auto(s: Sizes, o: OffloadConfig, b: Budgets, backend: string): { chosen: Candidate; explanation: string } {
  const none = resident(s, b)
  if (fitsIn(none)) return { chosen: none, explanation: `auto → none: ${fitText(none, s)}` }
  const residentNeeds = `resident needs ${binaryBytes(tierOf(none, 'device').total)} on the device (budget ${binaryBytes(b.device)})`
  const host = hostMode(s, o, b, AUTO_MIN_SLOTS, backend)
  if (fitsIn(host)) return { chosen: host, explanation: `auto → host: ${residentNeeds}; ${fitText(host, s)}` }
  const hostNeeds = `host mode needs ${binaryBytes(tierOf(host, 'host').total)} on the host (budget ${binaryBytes(b.host)})`
  if (o.optimizer === 'delayed')
    return { chosen: host, explanation: `auto: nothing fits (delayed updates are host-tier only): ${residentNeeds}; ${shortText(host.short[0]!)}` }
  const ssd = ssdMode(s, o, b, AUTO_MIN_SLOTS, backend)
  if (fitsIn(ssd)) return { chosen: ssd, explanation: `auto → ssd: ${residentNeeds}; ${hostNeeds}; ${fitText(ssd, s)}` }
  const device = ssd.short.find((x) => x.tier === 'device')
  const reported = device ? [shortText(device)] : [...ssd.problems, ...ssd.short.map(shortText)]
  return { chosen: ssd, explanation: `auto: nothing fits: ${residentNeeds}; ${device ? '' : `${hostNeeds}; `}${reported.join('; ')}` }
}

function decide(s: Sizes, o: OffloadConfig, b: Budgets, backend: string): { chosen: Candidate; explanation: string } {
  if (o.mode === 'auto') return auto(s, o, b, backend)
  const chosen = o.mode === 'none' ? resident(s, b) : o.mode === 'host' ? hostMode(s, o, b, 1, backend) : ssdMode(s, o, b, 1, backend)
  return { chosen, explanation: explicitText(chosen, s) }
}

export interface PlanOptions {
  /** The frozen base of a finetune method kept in bf16 (with train.compute_dtype bf16). */
  frozenBf16?: boolean
}

export function planRun(config: RunConfig, machine: Budgets, options: PlanOptions = {}): Plan {
  const o = config.offload ?? OffloadConfigSchema.parse({})
  const s = sizesOf(config)
  const b: Budgets = { device: o.device_budget_bytes ?? machine.device, host: o.host_budget_bytes ?? machine.host, ssd: machine.ssd }
  const decided = decide(s, o, b, config.train.backend ?? 'cpu')
  const c = decided.chosen
  const counts = countParams(config.model)
  return {
    requested: o.mode,
    mode: c.mode,
    fits: fitsIn(c),
    tiers: c.tiers,
    paramCount: counts.total,
    expertParamCount: counts.experts,
    expertBytes: s.expert,
    slots: c.slots,
    cacheExperts: c.cacheExperts,
    formulas: planFormulas({
      model: config.model, offload: o, sizes: s, mode: c.mode, slots: c.slots, mapped: c.mapped, cacheExperts: c.cacheExperts,
      minCache: minCacheEntries(o), tiers: c.tiers,
    }),
    explanation: decided.explanation,
    finetune: config.finetune ? finetuneVerdict(config, { mode: c.mode, frozenBf16: options.frozenBf16 }) : null,
  }
}
