#include "train/lora_adapter.h"

#include <vector>

namespace moe {

void merge_lora_adapters(const ParamLayout& layout, float* arena) {
  const double scale = layout.lora_scale();
  const int64_t r = layout.lora_rank();
  for (const LoraAdapter& a : layout.adapters()) {
    const float* A = arena + layout.tensors()[a.a].offset;
    const float* B = arena + layout.tensors()[a.b].offset;
    float* W = arena + layout.tensors()[a.base].offset + a.row0 * a.cols;
    std::vector<double> row(a.cols);
    for (int64_t i = 0; i < a.rows; ++i) {
      std::fill(row.begin(), row.end(), 0.0);
      for (int64_t k = 0; k < r; ++k) {
        const double b = B[i * r + k];
        if (b == 0) continue;
        for (int64_t c = 0; c < a.cols; ++c) row[c] += b * A[k * a.cols + c];
      }
      for (int64_t c = 0; c < a.cols; ++c) W[i * a.cols + c] = static_cast<float>(W[i * a.cols + c] + scale * row[c]);
    }
  }
}

}  // namespace moe
