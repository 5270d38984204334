// Choosing the compute backend: train.backend is checked against the registry, and a backend other than "cpu"
// trains only after its self-test has passed on this machine's device (validated-backends.json) or with
// train.allow_unvalidated_backend. The CUDA backend cannot run where there is no GPU, so the rule is tested as
// the functions it is made of, with records written here.
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <string>

#include "backend/registry.h"
#include "backend/validation.h"
#include "core/fsutil.h"
#include "core/json.h"
#include "model/config.h"
#include "testing.h"
#include "train/compute_backend.h"

namespace {

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const moe::EngineError& e) {
    return e.what();
  }
  return "";
}

moe::TrainConfig train_from(const std::string& json) {
  return moe::parse_train_config(moe::json::parse(json, "train"));
}

// A fresh $MOE_WORKBENCH_HOME for the records of one test.
std::string fresh_home(const std::string& name) {
  const std::string dir = moe::fs::join(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp",
                                        "moe-validation-" + name + "-" + std::to_string(::getpid()));
  moe::fs::remove_all(dir);
  setenv("MOE_WORKBENCH_HOME", dir.c_str(), 1);
  return dir;
}

}  // namespace

TEST(train_backend_defaults_to_cpu_and_is_written_only_when_not_default) {
  const moe::TrainConfig t = train_from("{}");
  CHECK(t.backend == "cpu" && !t.allow_unvalidated_backend);
  const std::string text = moe::json::dump(moe::train_config_to_json(t));
  CHECK_MSG(text.find("backend") == std::string::npos, text);
  const moe::TrainConfig c = train_from(R"({"backend": "cpu", "allow_unvalidated_backend": true})");
  CHECK(c.allow_unvalidated_backend);
  CHECK(moe::json::dump(moe::train_config_to_json(c)).find("\"allow_unvalidated_backend\":true") != std::string::npos);
}

TEST(unknown_train_backend_is_refused_naming_the_field_and_the_registered_ones) {
  const std::string e = error_of([] { train_from(R"({"backend": "tpu"})"); });
  CHECK_MSG(e.find("train.backend") != std::string::npos && e.find("\"tpu\"") != std::string::npos &&
                e.find("\"cpu\"") != std::string::npos,
            e);
}

TEST(cpu_needs_no_validation_and_others_need_a_record_of_their_device) {
  std::vector<moe::BackendValidation> records;
  CHECK(moe::validation_refusal("cpu", "", false, records).empty());
  const std::string why = moe::validation_refusal("cuda", "NVIDIA H100 80GB HBM3", false, records);
  CHECK_MSG(why.find("train.backend") != std::string::npos && why.find("selftest --backend cuda") != std::string::npos &&
                why.find("allow_unvalidated_backend") != std::string::npos,
            why);
  CHECK(moe::validation_refusal("cuda", "NVIDIA H100 80GB HBM3", true, records).empty());
  records.push_back({"cuda", "NVIDIA H200", "driver 13.0, runtime 13.0", "2026-01-01 00:00 UTC", "api 8"});
  CHECK(!moe::validation_refusal("cuda", "NVIDIA H100 80GB HBM3", false, records).empty());
  CHECK(moe::validation_refusal("cuda", "NVIDIA H200", false, records).empty());
  CHECK(moe::validation_status("cuda", "NVIDIA H200", records) == "validated on NVIDIA H200 (2026-01-01 00:00 UTC)");
  CHECK(moe::validation_status("cuda", "NVIDIA H100 80GB HBM3", records) == "not validated on NVIDIA H100 80GB HBM3");
  CHECK(moe::validation_status("cpu", "", records).empty());
}

TEST(records_round_trip_and_a_new_pass_replaces_the_old_one) {
  const std::string home = fresh_home("records");
  const std::string path = moe::validation_file();
  CHECK_MSG(path == moe::fs::join(home, "validated-backends.json"), path);
  CHECK(moe::read_validations(path).empty());
  moe::record_validation(path, moe::validation_now("cuda", "GPU A", "driver 1.0, runtime 1.0"));
  moe::record_validation(path, moe::validation_now("cuda", "GPU B", "driver 1.0, runtime 1.0"));
  moe::record_validation(path, {"cuda", "GPU A", "driver 2.0, runtime 2.0", "later", moe::engine_build()});
  const auto all = moe::read_validations(path);
  CHECK(all.size() == 2);
  const moe::BackendValidation* a = moe::find_validation(all, "cuda", "GPU A");
  CHECK(a && a->versions == "driver 2.0, runtime 2.0" && a->date == "later");
  CHECK(moe::find_validation(all, "cuda", "GPU B") != nullptr);
  moe::fs::remove_all(home);
}

TEST(train_gemm_names_the_library_and_is_checked_against_the_backend) {
  CHECK(train_from("{}").gemm == "own");
  CHECK(moe::json::dump(moe::train_config_to_json(train_from("{}"))).find("gemm") == std::string::npos);
  const moe::TrainConfig c = train_from(R"({"backend": "cuda", "gemm": "cublas"})");
  CHECK(c.gemm == "cublas");
  CHECK(moe::json::dump(moe::train_config_to_json(c)).find("\"gemm\":\"cublas\"") != std::string::npos);
  CHECK(train_from(R"({"gemm": "auto"})").gemm == "auto");  // any backend: its best
  std::string e = error_of([] { train_from(R"({"gemm": "cutlass"})"); });
  CHECK_MSG(e.find("train.gemm") != std::string::npos && e.find("\"cutlass\"") != std::string::npos, e);
  e = error_of([] { train_from(R"({"gemm": "cublas"})"); });
  CHECK_MSG(e.find("train.gemm") != std::string::npos && e.find("train.backend \"cuda\"") != std::string::npos, e);
  // The engine passes it on: the cpu backend, which has only its own GEMMs, runs with "auto".
  fresh_home("gemm");
  CHECK(moe::make_compute_backend(train_from(R"({"gemm": "auto"})"))->name() == "cpu");
}

TEST(the_engine_makes_the_configured_backend) {
  fresh_home("engine");
  auto be = moe::make_compute_backend(train_from(R"({"threads": 3})"));
  CHECK(be->name() == "cpu" && be->threads() == 3);
  // A registered backend this machine cannot run is refused saying why (here, in a build with CUDA and no GPU).
  for (const moe::BackendInfo& b : moe::list_backends()) {
    if (b.usable) continue;
    const std::string e = error_of([&] {
      moe::make_compute_backend(train_from(R"({"backend": ")" + b.name + R"(", "allow_unvalidated_backend": true})"));
    });
    CHECK_MSG(e.find(b.why_not) != std::string::npos, e);
  }
}

TEST_MAIN()
