// The backend a model computes on, as the run's config names it (train.backend), under the validation rule of
// backend/validation.h. Host-side helpers (the offload's host optimizer and norms) make "cpu" backends themselves.
#pragma once
#include <memory>

#include "backend/backend.h"
#include "model/config.h"

namespace moe {

std::unique_ptr<Backend> make_compute_backend(const TrainConfig& train);

}  // namespace moe
