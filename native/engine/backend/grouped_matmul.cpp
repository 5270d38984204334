// The grouped linear layers' definition: one matmul per group, in group order. Backends without a grouped kernel
// of their own (the CPU's, whose GEMMs already spread each group over every thread) use it as it is.
#include "backend/backend.h"

namespace moe {

void Backend::grouped_matmul_forward(float* y, const float* x, const LinearGroups& g, int I, int O) {
  for (int i = 0; i < g.size(); ++i) {
    if (g.rows[i] <= 0) continue;
    float* yi = y + g.row0[i] * O;
    const float* xi = x + g.row0[i] * I;
    if (g.w_bf16[i]) matmul_forward_bf16(yi, xi, g.w_bf16[i], g.b[i], g.rows[i], I, O);
    else matmul_forward(yi, xi, g.w[i], g.b[i], g.rows[i], I, O);
  }
}

void Backend::grouped_matmul_backward(float* dx, const float* dy, const float* x, const LinearGroups& g, int I,
                                      int O) {
  g.for_each_backward(dx, dy, x, I, O, [&](int i, float* dxi, const float* dyi, const float* xi) {
    if (g.w_bf16[i]) matmul_backward_bf16(dxi, g.dw[i], g.db[i], dyi, xi, g.w_bf16[i], g.rows[i], I, O);
    else matmul_backward(dxi, g.dw[i], g.db[i], dyi, xi, g.w[i], g.rows[i], I, O);
  });
}

void Backend::grouped_matmul_backward_write_dx(float* dx, const float* dy, const float* x, const LinearGroups& g,
                                               int I, int O) {
  g.for_each_backward(dx, dy, x, I, O, [&](int i, float* dxi, const float*, const float*) {
    zero(dxi, sizeof(float) * size_t(g.rows[i]) * I);
  });
  grouped_matmul_backward(dx, dy, x, g, I, O);
}

}  // namespace moe
