#include "backend/registry.h"

#include "core/error.h"

namespace moe {

// Each backend defines its entry beside its implementation.
const BackendEntry& cpu_backend_entry();
#if defined(MOE_HAVE_CUDA)
const BackendEntry& cuda_backend_entry();
#endif

namespace {

// Listed here rather than through static constructors: the engine is a static library, and the linker drops
// an object file that nothing references, registration and all.
const std::vector<const BackendEntry*>& entries() {
  static const std::vector<const BackendEntry*> all = {
      &cpu_backend_entry(),
#if defined(MOE_HAVE_CUDA)
      &cuda_backend_entry(),
#endif
  };
  return all;
}

std::string names() {
  std::string s;
  for (const BackendEntry* e : entries()) s += (s.empty() ? "\"" : ", \"") + std::string(e->name) + "\"";
  return s;
}

[[noreturn]] void unknown(const std::string& field, const std::string& name) {
  fail(field + ": no backend named \"" + name + "\" in this build; registered: " + names());
}

}  // namespace

std::vector<BackendInfo> list_backends() {
  std::vector<BackendInfo> out;
  for (const BackendEntry* e : entries()) {
    std::string why = e->unusable_reason();
    out.push_back({e->name, e->description, why.empty(), why});
  }
  return out;
}

void check_backend_name(const std::string& field, const std::string& name) {
  for (const BackendEntry* e : entries())
    if (name == e->name) return;
  unknown(field, name);
}

void check_gemm_choice(const std::string& field, const std::string& gemm) {
  if (gemm != "own" && gemm != "cublas" && gemm != "auto")
    fail(field + ": \"" + gemm + "\" is not supported; use \"own\", \"cublas\" or \"auto\"");
}

std::unique_ptr<Backend> make_backend(const std::string& name, const BackendOptions& options) {
  for (const BackendEntry* e : entries()) {
    if (name != e->name) continue;
    const std::string why = e->unusable_reason();
    check(why.empty(), "backend \"" + name + "\" cannot run on this machine: " + why);
    return e->make(options);
  }
  unknown("backend", name);
}

}  // namespace moe
