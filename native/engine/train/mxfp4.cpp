#include "train/mxfp4.h"

#include <cmath>

namespace moe {

float fp4_e2m1_value(uint8_t code) {
  static const float kValues[16] = {+0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f,
                                    -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  return kValues[code & 15];
}

void mxfp4_decode(const uint8_t* blocks, const uint8_t* scales, int64_t rows, int64_t groups, float* out) {
  for (int64_t g = 0; g < rows * groups; ++g) {
    const int exponent = static_cast<int>(scales[g]) - 127;
    const uint8_t* b = blocks + g * 16;
    float* o = out + g * 32;
    for (int i = 0; i < 16; ++i) {
      o[2 * i] = std::ldexp(fp4_e2m1_value(b[i] & 15), exponent);
      o[2 * i + 1] = std::ldexp(fp4_e2m1_value(b[i] >> 4), exponent);
    }
  }
}

}  // namespace moe
