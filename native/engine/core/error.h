// Engine errors: one exception type whose message names the field, file or offset at fault
// and says what to do. The C API turns it into a return code plus message.
#pragma once
#include <stdexcept>
#include <string>

namespace moe {

struct EngineError : std::runtime_error {
  explicit EngineError(const std::string& what) : std::runtime_error(what) {}
};

[[noreturn]] inline void fail(const std::string& what) { throw EngineError(what); }

inline void check(bool ok, const std::string& what) {
  if (!ok) fail(what);
}

}  // namespace moe
