#include "backend/cuda/cublas.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cuda/kernels.h"
#include "backend/cuda/runtime.h"
#include "core/error.h"

namespace moe::cuda {

namespace {

// The few values of cublas_api.h and library_types.h this file passes; they are part of cuBLAS's stable ABI.
constexpr int kOpN = 0, kOpT = 1;             // cublasOperation_t
constexpr int kR32F = 0, kR16BF = 14;         // cudaDataType_t
constexpr int kCompute32F = 68;               // cublasComputeType_t: fp32 accumulation, no down-conversion
constexpr int kGemmDefault = -1;              // cublasGemmAlgo_t
constexpr int kStatusSuccess = 0;             // cublasStatus_t

// bf16 bits of the fp32 matrix at src (rows × cols, rows ld apart), rounded as to_bf16 rounds, in stream-ordered
// scratch, freed on `stream` when this goes (after the work queued before that).
class Bf16Copy {
 public:
  Bf16Copy(cudaStream_t stream, const float* src, int64_t rows, int64_t cols, int64_t ld);
  ~Bf16Copy();
  Bf16Copy(const Bf16Copy&) = delete;
  Bf16Copy& operator=(const Bf16Copy&) = delete;
  const uint16_t* get() const { return data_; }

 private:
  cudaStream_t stream_;
  uint16_t* data_ = nullptr;
};

Bf16Copy::Bf16Copy(cudaStream_t stream, const float* src, int64_t rows, int64_t cols, int64_t ld) : stream_(stream) {
  if (rows <= 0 || cols <= 0) return;
  // Up to the last row's last element: rows ld apart may end before a full ld (a matrix inside a larger one).
  const int64_t n = (rows - 1) * ld + cols;
  cuda_check(cudaMallocAsync(reinterpret_cast<void**>(&data_), static_cast<size_t>(n) * sizeof(uint16_t), stream),
             "bf16 operand scratch");
  to_bf16(stream, data_, src, n);
}

Bf16Copy::~Bf16Copy() {
  if (data_) cudaFreeAsync(data_, stream_);
}

}  // namespace

// The library stays loaded for the process's life once opened (never dlclose'd): handles of other backends may
// still use it, and unloading a library that owns CUDA state while the context lives gains nothing.
struct Cublas::Api {
  using Create = int (*)(void**);
  using Destroy = int (*)(void*);
  using SetStream = int (*)(void*, cudaStream_t);
  using GetVersion = int (*)(void*, int*);
  using StatusString = const char* (*)(int);
  using GemmEx = int (*)(void*, int, int, int, int, int, const void*, const void*, int, int, const void*, int, int,
                         const void*, void*, int, int, int, int);
  void* lib = nullptr;
  void* lt = nullptr;  // libcublasLt beside it, opened first where the library's own search path lacks it
  Create create = nullptr;
  Destroy destroy = nullptr;
  SetStream set_stream = nullptr;
  GetVersion get_version = nullptr;
  StatusString status_string = nullptr;  // optional (cuBLAS 11.4 on)
  GemmEx gemm_ex = nullptr;
  // The symbol, or null with why set.
  template <class F>
  bool bind(F& f, const char* name, std::string& why) {
    f = reinterpret_cast<F>(dlsym(lib, name));
    if (!f) why = std::string("it has no ") + name;
    return f != nullptr;
  }
  std::string status(int s) const {
    const char* text = status_string ? status_string(s) : nullptr;
    return text ? std::string(text) : "status " + std::to_string(s);
  }
};

std::unique_ptr<Cublas> Cublas::open(cudaStream_t stream, std::string& why) {
  std::vector<std::string> candidates;
  const char* env = std::getenv("MOE_CUBLAS");
  if (env && *env) candidates.push_back(env);
  else candidates = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
  auto api = std::make_unique<Api>();
  std::string tried, path;
  for (const std::string& c : candidates) {
    const size_t slash = c.rfind('/'), so = c.find(".so", slash == std::string::npos ? 0 : slash);
    if (slash != std::string::npos && so != std::string::npos && !api->lt) {
      // libcublas needs libcublasLt; in a directory the loader does not search, open the one beside it first.
      const std::string lt = c.substr(0, slash + 1) + "libcublasLt" + c.substr(so);
      api->lt = dlopen(lt.c_str(), RTLD_NOW | RTLD_GLOBAL);
    }
    api->lib = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (api->lib) {
      path = c;
      break;
    }
    const char* err = dlerror();
    tried += (tried.empty() ? "" : "; ") + c + ": " + (err ? err : "not found");
  }
  if (!api->lib) {
    why = "cuBLAS not found (" + tried + "); set MOE_CUBLAS to the path of libcublas.so";
    return nullptr;
  }
  std::string missing;
  if (!api->bind(api->create, "cublasCreate_v2", missing) || !api->bind(api->destroy, "cublasDestroy_v2", missing) ||
      !api->bind(api->set_stream, "cublasSetStream_v2", missing) ||
      !api->bind(api->get_version, "cublasGetVersion_v2", missing) ||
      !api->bind(api->gemm_ex, "cublasGemmEx", missing)) {
    why = "cuBLAS at " + path + " cannot be used: " + missing;
    return nullptr;
  }
  api->status_string = reinterpret_cast<Api::StatusString>(dlsym(api->lib, "cublasGetStatusString"));
  void* handle = nullptr;
  if (const int s = api->create(&handle); s != kStatusSuccess) {
    why = "cuBLAS at " + path + ": cublasCreate failed: " + api->status(s);
    return nullptr;
  }
  int version = 0;
  api->get_version(handle, &version);
  if (const int s = api->set_stream(handle, stream); s != kStatusSuccess) {
    why = "cuBLAS at " + path + ": cublasSetStream failed: " + api->status(s);
    api->destroy(handle);
    return nullptr;
  }
  // cuBLAS numbers versions major·10000 + minor·100 + patch (12.8.4 is 120804); older ones major·1000 + minor·100.
  const int major = version >= 100000 ? version / 10000 : version / 1000;
  const int minor = version >= 100000 ? version % 10000 / 100 : version % 1000 / 100;
  const int patch = version % 100;
  const std::string describe = "cuBLAS " + std::to_string(major) + "." + std::to_string(minor) + "." +
                               std::to_string(patch) + " (" + path + ")";
  return std::unique_ptr<Cublas>(new Cublas(std::move(api), handle, stream, describe));
}

Cublas::Cublas(std::unique_ptr<Api> api, void* handle, cudaStream_t stream, std::string describe)
    : api_(std::move(api)), handle_(handle), stream_(stream), describe_(std::move(describe)) {}

Cublas::~Cublas() {
  if (handle_) api_->destroy(handle_);
}

// Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, and a row-major matrix read column-major is its
// transpose: so cuBLAS gets B first, each with its own transpose flag, and M, N swapped.
void Cublas::gemm_ex(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const void* A, int a_type, int lda,
                     const void* B, int b_type, int ldb, float beta, float* C, int ldc) const {
  if (M <= 0 || N <= 0 || (K <= 0 && beta == 1.0f)) return;  // nothing to add (an expert without tokens)
  const int s = api_->gemm_ex(handle_, trans_b ? kOpT : kOpN, trans_a ? kOpT : kOpN, N, M, K, &alpha, B, b_type, ldb,
                              A, a_type, lda, &beta, C, kR32F, ldc, kCompute32F, kGemmDefault);
  check(s == kStatusSuccess, "cuBLAS: cublasGemmEx (" + std::to_string(M) + "x" + std::to_string(N) + "x" +
                                 std::to_string(K) + ") failed: " + api_->status(s));
}

void Cublas::sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                   const float* B, int ldb, float beta, float* C, int ldc) const {
  gemm_ex(trans_a, trans_b, M, N, K, alpha, A, kR32F, lda, B, kR32F, ldb, beta, C, ldc);
}

void Cublas::sgemm_bf16(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const void* A, bool a_bf16,
                        int lda, const void* B, bool b_bf16, int ldb, float beta, float* C, int ldc) const {
  if (M <= 0 || N <= 0 || (K <= 0 && beta == 1.0f)) return;
  // Stored shapes: op(A) is M×K, so A is K×M when transposed; op(B) is K×N, so B is N×K when transposed.
  std::unique_ptr<Bf16Copy> a16, b16;
  if (!a_bf16) {
    a16 = std::make_unique<Bf16Copy>(stream_, static_cast<const float*>(A), trans_a ? K : M, trans_a ? M : K, lda);
    A = a16->get();
  }
  if (!b_bf16) {
    b16 = std::make_unique<Bf16Copy>(stream_, static_cast<const float*>(B), trans_b ? N : K, trans_b ? K : N, ldb);
    B = b16->get();
  }
  gemm_ex(trans_a, trans_b, M, N, K, alpha, A, kR16BF, lda, B, kR16BF, ldb, beta, C, ldc);
}

}  // namespace moe::cuda
