#include "backend/cpu/isa.h"

#include "core/error.h"

namespace moe::cpu {

Isa parse_isa(const std::string& name) {
  if (name == "native" || name.empty()) return Isa::Native;
  if (name == "scalar") return Isa::Scalar;
  fail("isa: unknown CPU kernel choice '" + name + "'; expected \"native\" or \"scalar\"");
}

const char* isa_name(Isa isa) { return isa == Isa::Native ? "native" : "scalar"; }

}  // namespace moe::cpu
