// describeModel(configJson) -> string: moe_model_describe's JSON, or a JS Error with the engine's message.
#pragma once
#include <napi.h>

namespace moe_addon {

Napi::Value DescribeModel(const Napi::CallbackInfo& info);
// inspectHf(dir) -> string: moe_hf_inspect's JSON, or a JS Error when dir is not a model folder.
Napi::Value InspectHf(const Napi::CallbackInfo& info);

}  // namespace moe_addon
