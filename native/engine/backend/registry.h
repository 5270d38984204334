// The backends built into this binary, by name. Code that needs a backend asks the registry for one by name and
// options; it never constructs a particular backend itself, so adding a backend touches its own directory and the
// registry's list only.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace moe {

struct BackendOptions {
  int threads = 1;             // host threads the backend may use (the CPU backend's pool; values below 1 mean 1)
  std::string isa = "native";  // CPU kernels: "native" (the fastest this CPU runs) or "scalar" (the reference path)
  bool pack_bf16_weights = true;  // CPU: keep_bf16_weights packs (false: every bf16 GEMM packs its weight anew)
  // CPU: say its Device memory is not host memory (Backend::device_memory_is_host), as a discrete device's is not,
  // so the host-side code takes the paths it takes for one; for tests of those paths on a machine without one.
  bool device_memory_apart = false;
  // CUDA: the linear layers' GEMMs: "own" (our kernels), "cublas" (cuBLAS opened at run time, backend/cuda/cublas.h;
  // making the backend fails saying why when it cannot be opened) or "auto" (cuBLAS where it opens, else ours).
  // Other backends have only their own.
  std::string gemm = "own";
};

struct BackendInfo {
  std::string name;         // what make_backend takes
  std::string description;  // what it is
  bool usable = false;      // whether it can run on this machine
  std::string why_not;      // when not usable: the reason
};

// What a backend registers: its name, what it is, whether this machine can run it, and how to make one.
struct BackendEntry {
  const char* name;
  const char* description;
  std::string (*unusable_reason)();  // empty when usable here
  std::unique_ptr<Backend> (*make)(const BackendOptions&);
};

// Every registered backend, usable or not, in registration order.
std::vector<BackendInfo> list_backends();

// Fails naming `field` and the registered backends unless one is called name.
void check_backend_name(const std::string& field, const std::string& name);

// Fails naming `field` unless gemm is one of BackendOptions::gemm's values.
void check_gemm_choice(const std::string& field, const std::string& gemm);

// A new backend of that name. Fails naming the registered backends when none has that name, and saying why when
// the backend cannot run on this machine.
std::unique_ptr<Backend> make_backend(const std::string& name, const BackendOptions& options = {});

}  // namespace moe
