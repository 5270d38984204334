// The backend registry: what it lists, what it makes, and the errors for an unknown backend or ISA choice.
#include <dlfcn.h>

#include <cstdio>
#include <string>

#include "backend/registry.h"
#include "core/json.h"
#include "core/threadpool.h"
#include "include/moe_engine.h"
#include "testing.h"

namespace {

std::string error_of(const std::string& name, const moe::BackendOptions& o) {
  try {
    moe::make_backend(name, o);
  } catch (const moe::EngineError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// Where the NVIDIA driver is absent, the cuda backend says so in those words (the runtime itself would report an
// insufficient driver version, as if one were installed but old).
TEST(cuda_without_a_driver_says_the_driver_is_missing) {
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (driver) {
    dlclose(driver);
    std::printf("  (an NVIDIA driver is installed here: nothing to check)\n");
    return;
  }
  bool listed = false;
  for (const moe::BackendInfo& b : moe::list_backends())
    if (b.name == "cuda") {
      listed = true;
      CHECK_MSG(!b.usable && b.why_not.find("no NVIDIA driver is installed") != std::string::npos, b.why_not);
    }
  if (!listed) std::printf("  (this build has no cuda backend: nothing to check)\n");
}

TEST(cpu_backend_is_registered_and_usable) {
  bool found = false;
  for (const moe::BackendInfo& b : moe::list_backends()) {
    CHECK_MSG(!b.description.empty(), b.name + " has no description");
    CHECK_MSG(b.usable == b.why_not.empty(), b.name + ": usable and why_not disagree");
    if (b.name == "cpu") found = b.usable;
  }
  CHECK(found);
  auto be = moe::make_backend("cpu", {3});
  CHECK(be->name() == "cpu" && be->threads() == 3);
  auto ref = moe::make_backend("cpu", {1, "scalar"});
  CHECK_MSG(ref->describe().find("sgemm scalar") != std::string::npos, ref->describe());
  CHECK_MSG(ref->describe().find("bf16 gemm portable") != std::string::npos, ref->describe());
}

// More threads than the process's CPUs are much slower, not faster: the description (the CLI's start line) says so.
TEST(more_threads_than_cpus_is_said_in_the_description) {
  const int cpus = moe::usable_cpus();
  CHECK(cpus >= 1);
  const std::string fits = moe::make_backend("cpu", {cpus})->describe();
  CHECK_MSG(fits.find("more threads than CPUs") == std::string::npos, fits);
  const std::string over = moe::make_backend("cpu", {cpus + 1})->describe();
  CHECK_MSG(over.find(std::to_string(cpus + 1) + " threads on " + std::to_string(cpus) +
                      " CPUs: more threads than CPUs") != std::string::npos &&
                over.find("train.threads " + std::to_string(cpus) + " is faster") != std::string::npos,
            over);
}

TEST(unknown_backend_error_names_the_registered_ones) {
  const std::string e = error_of("cuda-x", {});
  CHECK_MSG(e.find("cuda-x") != std::string::npos && e.find("\"cpu\"") != std::string::npos, e);
}

TEST(unknown_isa_error_names_the_field_and_choices) {
  const std::string e = error_of("cpu", {1, "avx9"});
  CHECK_MSG(e.find("isa") != std::string::npos && e.find("avx9") != std::string::npos &&
                e.find("scalar") != std::string::npos,
            e);
}

TEST(the_scalar_reference_path_says_its_bf16_is_not_native) {
  CHECK(!moe::make_backend("cpu", {1, "scalar"})->bf16_native());
}

TEST(c_api_lists_the_backends_as_json) {
  const moe::json::Value v = moe::json::parse(moe_engine_list_backends(), "backends");
  CHECK(v.is_array() && !v.array.empty());
  bool cpu = false;
  for (const moe::json::Value& b : v.array) {
    const moe::json::Value* name = b.find("name");
    const moe::json::Value* usable = b.find("usable");
    const moe::json::Value* kernels = b.find("kernels");
    CHECK(name && name->is_string() && usable && usable->is_bool() && b.find("description") && b.find("why_not") &&
          kernels && kernels->is_string());
    if (!name || !usable || name->string != "cpu") continue;
    cpu = usable->boolean;
    // The kernels the CPU backend picks here, as its describe line names them.
    const std::string described = moe::make_backend("cpu")->describe();
    CHECK_MSG(kernels->string.rfind("sgemm ", 0) == 0 && kernels->string.find(", bf16 gemm ") != std::string::npos &&
                  described.find(kernels->string) != std::string::npos,
              kernels->string + " | " + described);
    // bf16 on bf16 units exactly when the bf16 kernel is one of the families that has them.
    const moe::json::Value* native = b.find("bf16_native");
    const bool units = kernels->string.find("bf16 gemm amx") != std::string::npos ||
                       kernels->string.find("bf16 gemm avx512_bf16") != std::string::npos;
    CHECK_MSG(native && native->is_bool() && native->boolean == units, kernels->string);
  }
  CHECK(cpu);
}

TEST_MAIN()
