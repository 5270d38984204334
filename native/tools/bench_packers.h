// `moe-engine-dev bench --bf16 --packers`: the sgemm_bf16 operand packers of every kernel family this CPU runs,
// in nanoseconds per element, side by side.
#pragma once

namespace bench {

void bf16_packers(bool json);

}  // namespace bench
