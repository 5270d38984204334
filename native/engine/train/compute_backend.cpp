#include "train/compute_backend.h"

#include "backend/registry.h"
#include "backend/validation.h"
#include "core/error.h"

namespace moe {

std::unique_ptr<Backend> make_compute_backend(const TrainConfig& train) {
  // The name was checked when the config was parsed (train.backend); make_backend names the registered ones too.
  BackendOptions options;
  options.threads = train.threads;
  options.pack_bf16_weights = train.pack_frozen_bf16;
  options.gemm = train.gemm;
  std::unique_ptr<Backend> be = make_backend(train.backend, options);
  if (train.backend != "cpu" && !train.allow_unvalidated_backend) {
    const std::string why = validation_refusal(train.backend, be->device(), false, read_validations(validation_file()));
    check(why.empty(), why);
  }
  return be;
}

}  // namespace moe
