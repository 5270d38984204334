// Text out through the C API's (buffer, length) convention: as much as fits, always NUL-terminated, and the
// full length returned so a caller can retry with a buffer large enough.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace moe {

inline int64_t write_c_text(const std::string& text, char* out, size_t out_len) {
  if (out && out_len > 0) {
    const size_t n = std::min(text.size(), out_len - 1);
    std::memcpy(out, text.data(), n);
    out[n] = '\0';
  }
  return static_cast<int64_t>(text.size());
}

}  // namespace moe
