// Which kernel builds the CPU ops run: "native" takes the fastest the CPU has (AVX-512, AVX2), "scalar" runs the
// baseline builds everywhere, which makes the scalar path the reference other backends are checked against.
// The choice belongs to the calling thread: every op picks its kernels on the calling thread before handing work
// to the pool, so a backend sets it for the duration of each op (IsaScope) and two backends never see each other's.
#pragma once
#include <string>

namespace moe::cpu {

enum class Isa { Native, Scalar };

// "native" or "scalar"; anything else fails naming the accepted values.
Isa parse_isa(const std::string& name);
const char* isa_name(Isa isa);

namespace isa_detail {
inline thread_local Isa tl_isa = Isa::Native;
}

inline Isa current_isa() { return isa_detail::tl_isa; }

class IsaScope {
 public:
  explicit IsaScope(Isa isa) : saved_(isa_detail::tl_isa) { isa_detail::tl_isa = isa; }
  ~IsaScope() { isa_detail::tl_isa = saved_; }
  IsaScope(const IsaScope&) = delete;
  IsaScope& operator=(const IsaScope&) = delete;

 private:
  Isa saved_;
};

}  // namespace moe::cpu
