// moe_hf_inspect: a Hugging Face model folder checked against the engine's import without loading a weight.
#include <string>

#include "capi_text.h"
#include "core/error.h"
#include "include/moe_engine.h"
#include "train/hf_inspect.h"

extern "C" int64_t moe_hf_inspect(const char* dir, char* out, size_t out_len) {
  try {
    moe::check(dir != nullptr, "dir: missing (NULL)");
    return moe::write_c_text(moe::json::dump(moe::inspect_hf_dir(dir)), out, out_len);
  } catch (const std::exception& e) {
    moe::write_c_text(e.what(), out, out_len);
    return -1;
  }
}
