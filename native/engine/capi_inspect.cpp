// moe_hf_inspect: a Hugging Face model folder checked against the engine's import without loading a weight.
#include <algorithm>
#include <cstring>
#include <string>

#include "core/error.h"
#include "include/moe_engine.h"
#include "train/hf_inspect.h"

namespace {

int64_t write_text(const std::string& text, char* out, size_t out_len) {
  if (out && out_len > 0) {
    const size_t n = std::min(text.size(), out_len - 1);
    std::memcpy(out, text.data(), n);
    out[n] = '\0';
  }
  return static_cast<int64_t>(text.size());
}

}  // namespace

extern "C" int64_t moe_hf_inspect(const char* dir, char* out, size_t out_len) {
  try {
    moe::check(dir != nullptr, "dir: missing (NULL)");
    return write_text(moe::json::dump(moe::inspect_hf_dir(dir)), out, out_len);
  } catch (const std::exception& e) {
    write_text(e.what(), out, out_len);
    return -1;
  }
}
