// The ISA builds of the CPU's row and span kernels: each *_avx512.cpp and *_avx2.cpp file compiles the baseline
// kernel of its op (the header named beside it) for that ISA under these names. The ops pick one with pick_kernel
// (kernel_util.h); the tests run every build the CPU has against the baseline.
#pragma once
#include <cstdint>

namespace moe::cpu {

// swiglu_kernels.h
void swiglu_forward_row_avx512(float* out, const float* gate, const float* up, int F);
void swiglu_backward_row_avx512(float* dgate, float* dup, const float* dout, const float* gate, const float* up, int F);
void swiglu_backward_write_row_avx512(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                                      int F);
void swiglu_forward_row_avx2(float* out, const float* gate, const float* up, int F);
void swiglu_backward_row_avx2(float* dgate, float* dup, const float* dout, const float* gate, const float* up, int F);
void swiglu_backward_write_row_avx2(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                                    int F);

// gelu_kernels.h
void gelu_forward_span_avx512(float* out, const float* inp, int64_t n);
void gelu_backward_span_avx512(float* dinp, const float* inp, const float* dout, int64_t n);
void gelu_forward_span_avx2(float* out, const float* inp, int64_t n);
void gelu_backward_span_avx2(float* dinp, const float* inp, const float* dout, int64_t n);

// crossentropy_rows.h
float crossentropy_row_lse_avx512(const float* x, int V);
void crossentropy_row_grad_avx512(float* dx, const float* x, int target, float scale, int V);
float crossentropy_row_lse_avx2(const float* x, int V);
void crossentropy_row_grad_avx2(float* dx, const float* x, int target, float scale, int V);

// attention_rows.h
float attention_softmax_row_avx512(float* p, int lo, int visible, int nk, const float* sink);
float attention_grad_row_avx512(float* p, float* ds, const float* dout, const float* out, int HS, float lse, float scale,
                                int lo, int visible, int nk);
float attention_softmax_row_avx2(float* p, int lo, int visible, int nk, const float* sink);
float attention_grad_row_avx2(float* p, float* ds, const float* dout, const float* out, int HS, float lse, float scale,
                              int lo, int visible, int nk);

// fp32 -> bf16 words as moe::f32_to_bf16 rounds them (convert_bf16.cpp's baseline loop).
void to_bf16_span_avx512(uint16_t* dst, const float* src, int64_t n);
void to_bf16_span_avx2(uint16_t* dst, const float* src, int64_t n);

}  // namespace moe::cpu
