// The held-out loss: the model's mean cross-entropy over the first batches of an evaluation token shard,
// forward only, with the router's own choices (no routing skew). Resident experts only (config.cpp refuses
// evaluation with offload); the devices' placement records of these forwards are dropped, so the step's
// telemetry describes the training step alone.
#pragma once
#include "model/model.h"
#include "train/token_data.h"

namespace moe {

// Mean over every unmasked target of `batches` consecutive [B, T] windows from the shard's start (fewer when
// the shard is short: it holds at least one). NaN when no target is unmasked.
double evaluate_loss(Model& model, const TokenData& data, int batches, int B, int T);

}  // namespace moe
