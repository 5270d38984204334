// Whether train.compute_dtype bf16 is faster than fp32 on the backend a run would use: the engine says per backend
// whether its bf16 products run on bf16 units (bf16Native). Without them bf16 computes the same bits on fp32
// arithmetic: bf16's rounding at fp32's speed. Shown by the Hardware view and by the New-run form's pre-flight.
import type { Hardware } from '../../main/api/contract'

export const BF16_NOT_FASTER =
  'No bf16 instructions here: train.compute_dtype bf16 computes the same bits on fp32 arithmetic, so it is not faster than fp32.'

/** True when `backend` can run here and its bf16 compute would not run on bf16 units; false when unknown. */
export function bf16NotFaster(hw: Hardware | null, backend: string): boolean {
  const b = hw?.engineBackends.find((x) => x.name === backend)
  return b !== undefined && b.usable && !b.bf16Native
}
