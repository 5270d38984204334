// Safetensors (https://github.com/huggingface/safetensors) reader and writer, plus sharded Hugging Face
// checkpoints. The reader memory-maps the file and validates the whole header on open, so every later
// access is in bounds; errors name the file, byte offset and reason.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/fsutil.h"

namespace moe::st {

enum class DType { F32, F16, BF16, F64, I8, I16, I32, I64, U8, U16, U32, U64, BOOL, F8_E4M3, F8_E5M2 };

const char* dtype_name(DType t);
size_t dtype_size(DType t);
// False when `name` is not a safetensors dtype string ("F32", "BF16", ...).
bool parse_dtype(const std::string& name, DType* out);

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte range within the data buffer
  int64_t numel() const;
};

std::string shape_str(const std::vector<int64_t>& shape);

class Reader {
 public:
  explicit Reader(const std::string& path);

  const std::string& path() const { return file_.path(); }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // in header order
  const TensorInfo* find(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Raw little-endian bytes; may be unaligned for the dtype (offsets are packed), so copy rather than cast.
  const uint8_t* data(const TensorInfo& t) const { return file_.data() + data_start_ + t.begin; }

  // Converts an F32/F16/BF16/F64 tensor to float into dst (numel floats). Fails naming the tensor when it
  // is absent, has another dtype, or its shape differs from expected_shape.
  void read_f32(const std::string& name, float* dst, const std::vector<int64_t>& expected_shape) const;
  void read_f32(const TensorInfo& t, float* dst, const std::vector<int64_t>& expected_shape) const;
  // Elements [first, first + count) of a float tensor (in stored order) into dst. Both reads hand the file pages
  // they went through back (MappedFile::drop), so a load streams through a checkpoint larger than memory.
  void read_f32_range(const TensorInfo& t, float* dst, size_t first, size_t count) const;
  // An I32 or I64 tensor (I64 values range-checked) as int32.
  std::vector<int32_t> read_i32(const std::string& name) const;

 private:
  const TensorInfo& get(const std::string& name) const;
  void validate(const std::string& header);

  fs::MappedFile file_;
  uint64_t data_start_ = 0;  // 8 + header length
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

class Writer {
 public:
  // Tensors are referenced, not copied: their data must stay alive and unchanged until write().
  void add_f32(const std::string& name, const float* data, std::vector<int64_t> shape);
  void add(const std::string& name, DType dtype, const void* data, std::vector<int64_t> shape);
  // A tensor whose data is asked for only as write() reaches it (in insertion order); the pointer must stay valid
  // until the next tensor's is asked for. So a file larger than memory streams from wherever its parts live; an
  // exception from `data` abandons the write (the file is not created).
  void add_f32_streamed(const std::string& name, std::vector<int64_t> shape, std::function<const float*()> data);
  // The same for a tensor in any dtype: `data` returns its bytes.
  void add_streamed(const std::string& name, DType dtype, std::vector<int64_t> shape, std::function<const void*()> data);
  // The same asked for in `pieces` equal consecutive parts (a fused expert tensor, one expert's slab each): `data(k)`
  // returns part k's bytes, valid until the next call. The first dimension must divide evenly.
  void add_streamed_pieces(const std::string& name, DType dtype, std::vector<int64_t> shape, size_t pieces,
                           std::function<const void*(size_t)> data);
  void set_metadata(const std::string& key, const std::string& value);
  // Writes atomically (temp file, fsync, rename); header padded with spaces to a multiple of 8 so the
  // data buffer is 8-byte aligned; tensors in insertion order.
  void write(const std::string& path) const;

 private:
  struct Entry {
    std::string name;
    DType dtype;
    const void* data;
    std::vector<int64_t> shape;
    uint64_t bytes;
    size_t pieces = 1;
    std::function<const void*(size_t)> piece;  // set: data is asked for at write time, a piece at a time
  };
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

// The tensors of a checkpoint directory: `model.safetensors`, or when absent the shards listed by
// `model.safetensors.index.json` ({"weight_map": {tensor: file}}). A path to a .safetensors file also works.
class TensorSet {
 public:
  struct Entry {
    const Reader* reader;
    const TensorInfo* info;
  };

  explicit TensorSet(const std::string& path);

  const std::string& path() const { return path_; }
  const Entry* find(const std::string& name) const;
  const std::map<std::string, Entry>& entries() const { return entries_; }  // sorted by name
  void read_f32(const std::string& name, float* dst, const std::vector<int64_t>& expected_shape) const;

 private:
  void open_index(const std::string& index_path);

  std::string path_;
  std::vector<std::unique_ptr<Reader>> readers_;
  std::map<std::string, Entry> entries_;
};

}  // namespace moe::st
