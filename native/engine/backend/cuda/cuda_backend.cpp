// The CUDA backend's device, stream and memory, and its registry entry. The op overrides live in cuda_ops.cpp and
// cuda_ops_moe.cpp. The runtime is linked statically, so a machine without the NVIDIA driver loads the engine
// and merely finds this backend unusable.
#include "backend/cuda/cuda_backend.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>

#include "backend/cuda/kernels.h"
#include "backend/cuda/runtime.h"
#include "backend/validation.h"
#include "core/error.h"
#include "core/host_memory.h"

namespace moe {

using cuda::cuda_check;

namespace {

std::string gib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", (double)bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

std::string compute_capability(const cudaDeviceProp& p) {
  return std::to_string(p.major) + "." + std::to_string(p.minor);
}

// What stops the runtime (linked statically) from reaching a device, in the user's terms: with no NVIDIA driver at
// all the runtime reports "CUDA driver version is insufficient for CUDA runtime version", which reads as if a
// driver were there but old.
std::string driver_problem(cudaError_t err) {
  if (err != cudaErrorInsufficientDriver) return cudaGetErrorString(err);
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!driver) return "no NVIDIA driver is installed (libcuda.so.1 is not on the loader's path)";
  dlclose(driver);
  int version = 0;
  cudaDriverGetVersion(&version);
  auto release = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
  return "the NVIDIA driver supports CUDA " + release(version) + ", older than this build's runtime (CUDA " +
         release(CUDART_VERSION) + "): update the driver";
}

std::string cuda_unusable_reason() {
  static const std::string why = [] {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) return std::string("no CUDA device: ") + driver_problem(err);
    if (count == 0) return std::string("no CUDA device");
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) return std::string("CUDA device 0 could not be queried");
    // The bf16 GEMM uses WMMA bf16 fragments, which need compute capability 8.0.
    if (p.major < 8)
      return std::string(p.name) + " has compute capability " + compute_capability(p) + "; this backend needs 8.0+";
    // Host threads (the offload's AdamW and norms, CPU placement devices) read and write managed memory while
    // kernels run, and Stage allocates from the stream-ordered pool: without either, refuse here rather than fault.
    int concurrent_managed = 0, pools = 0;
    cudaDeviceGetAttribute(&concurrent_managed, cudaDevAttrConcurrentManagedAccess, 0);
    cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, 0);
    if (!concurrent_managed || !pools)
      return std::string(p.name) + " lacks " +
             (!concurrent_managed ? "concurrent managed memory access" : "stream-ordered memory pools") +
             ", which this backend needs (a virtualised GPU may not offer it)";
    const cudaError_t load = cuda::kernels_loadable();
    if (load != cudaSuccess) {
      cudaGetLastError();
      return std::string(p.name) + " (compute capability " + compute_capability(p) +
             ") cannot run this build's kernels: " + cudaGetErrorString(load) +
             "; rebuild with CMAKE_CUDA_ARCHITECTURES naming it";
    }
    return std::string();
  }();
  return why;
}

std::unique_ptr<Backend> make_cuda(const BackendOptions& o) { return std::make_unique<CudaBackend>(o); }

}  // namespace

CudaBackend::CudaBackend(const BackendOptions& options) : threads_(options.threads < 1 ? 1 : options.threads) {
  cuda_check(cudaSetDevice(device_), "selecting device 0");
  cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "creating the stream");
  cuda_check(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking), "creating the copy stream");
  check_gemm_choice("cuda: gemm", options.gemm);
  if (options.gemm == "own") return;
  std::string why;
  blas_ = cuda::Cublas::open(stream_, why);
  check(blas_ || options.gemm == "auto", "cuda: gemm \"cublas\": " + why);
  if (!blas_) blas_absent_ = why;
}

CudaBackend::~CudaBackend() {
  blas_.reset();  // its handle works on stream_, which must outlive it
  for (cudaStream_t s : {stream_, copy_stream_}) {
    if (!s) continue;
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
  }
}

std::string CudaBackend::device() const {
  cudaDeviceProp p{};
  cuda_check(cudaGetDeviceProperties(&p, device_), "device properties");
  return p.name;
}

std::string CudaBackend::versions() const {
  return "driver " + cuda::driver_version() + ", runtime " + cuda::runtime_version();
}

std::string CudaBackend::kernels() const {
  return blas_ ? "linear layers on " + blas_->describe() + ", the rest on our kernels"
               : "gemm fp32 tiled SIMT, bf16 WMMA tensor cores" +
                     (blas_absent_.empty() ? std::string() : " (cuBLAS asked for if found: " + blas_absent_ + ")");
}

std::string CudaBackend::describe() const {
  cudaDeviceProp p{};
  cuda_check(cudaGetDeviceProperties(&p, device_), "device properties");
  return "cuda (" + std::string(p.name) + ", compute capability " + compute_capability(p) + ", " +
         gib(p.totalGlobalMem) + "; " + versions() + "; " + kernels() + "; every op synchronous; " +
         validation_status_here("cuda", p.name) + ")";
}

void* CudaBackend::alloc(MemKind kind, size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  switch (kind) {
    case MemKind::Device:
      // Managed, so the host code that reads results in place (losses, plans, checkpoints) still can.
      cuda_check(cudaMallocManaged(&p, bytes, cudaMemAttachGlobal), "allocating device memory");
      return p;
    case MemKind::PinnedHost:
      cuda_check(cudaMallocHost(&p, bytes), "allocating pinned host memory");
      return p;
    case MemKind::PageableHost:
      p = host_alloc(bytes);
      check(p != nullptr, "out of host memory allocating " + std::to_string(bytes) + " bytes");
      return p;
  }
  return nullptr;
}

// Buffers are released from destructors, also while an earlier CUDA error unwinds the stack; after a kernel fault
// every free fails with that sticky error, and throwing again would terminate before the first error is reported.
// So a failed free is written to stderr and not thrown.
void CudaBackend::release(MemKind kind, void* ptr) {
  if (!ptr) return;
  auto report = [](cudaError_t e, const char* what) {
    if (e != cudaSuccess) std::fprintf(stderr, "cuda: %s: %s\n", what, cudaGetErrorString(e));
  };
  switch (kind) {
    case MemKind::Device:
      report(cudaFree(ptr), "freeing device memory");
      return;
    case MemKind::PinnedHost:
      report(cudaFreeHost(ptr), "freeing pinned host memory");
      return;
    case MemKind::PageableHost:
      host_free(ptr);
      return;
  }
}

namespace {

// A copy or clear on `stream`, waited for: the ops' stream for copy()/zero(), the copy stream for transfer*().
void copy_on(cudaStream_t stream, void* dst, const void* src, size_t bytes, const char* what) {
  if (bytes == 0) return;
  cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream), what);
  cuda_check(cudaStreamSynchronize(stream), what);
}

void zero_on(cudaStream_t stream, void* ptr, size_t bytes, const char* what) {
  if (bytes == 0) return;
  if (void* d = cuda::device_view(ptr)) {
    cuda_check(cudaMemsetAsync(d, 0, bytes, stream), what);
    cuda_check(cudaStreamSynchronize(stream), what);
  } else {
    std::memset(ptr, 0, bytes);
  }
}

}  // namespace

void CudaBackend::copy(void* dst, const void* src, size_t bytes) { copy_on(stream_, dst, src, bytes, "copy"); }
void CudaBackend::zero(void* ptr, size_t bytes) { zero_on(stream_, ptr, bytes, "zero"); }
void CudaBackend::synchronize() { cuda_check(cudaStreamSynchronize(stream_), "synchronize"); }

// On the copy stream, so an upload from pinned host memory runs on the copy engine while the compute stream's
// kernels run; the calling (copy) thread waits, the compute thread does not.
void CudaBackend::transfer(void* dst, const void* src, size_t bytes) {
  copy_on(copy_stream_, dst, src, bytes, "transfer");
}
void CudaBackend::transfer_zero(void* ptr, size_t bytes) { zero_on(copy_stream_, ptr, bytes, "transfer_zero"); }

const BackendEntry& cuda_backend_entry() {
  static const BackendEntry entry{"cuda", "NVIDIA GPU through CUDA, kernels of our own", &cuda_unusable_reason,
                                  &make_cuda};
  return entry;
}

}  // namespace moe
