// describeModel(configJson) -> string: moe_model_describe's JSON, or a JS Error with the engine's message.
#pragma once
#include <napi.h>

namespace moe_addon {

Napi::Value DescribeModel(const Napi::CallbackInfo& info);

}  // namespace moe_addon
