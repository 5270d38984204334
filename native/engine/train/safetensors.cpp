#include "train/safetensors.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string_view>

#include "core/error.h"
#include "core/half.h"
#include "core/json.h"

namespace moe::st {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian; add byte swapping");

namespace {

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference implementation's cap
constexpr uint64_t kMaxIndexBytes = 100'000'000;
constexpr double kMaxExactInt = 9007199254740992.0;  // 2^53: JSON numbers above this are not exact integers
const char* const kFix = "; the file is corrupt or truncated: re-export or re-download it";

struct DTypeName {
  DType type;
  const char* name;
  size_t size;
};
constexpr DTypeName kDTypes[] = {
    {DType::F32, "F32", 4},  {DType::F16, "F16", 2},   {DType::BF16, "BF16", 2},    {DType::F64, "F64", 8},
    {DType::I8, "I8", 1},    {DType::I16, "I16", 2},   {DType::I32, "I32", 4},      {DType::I64, "I64", 8},
    {DType::U8, "U8", 1},    {DType::U16, "U16", 2},   {DType::U32, "U32", 4},      {DType::U64, "U64", 8},
    {DType::BOOL, "BOOL", 1}, {DType::F8_E4M3, "F8_E4M3", 1}, {DType::F8_E5M2, "F8_E5M2", 1},
};

std::string all_dtype_names() {
  std::string s;
  for (const auto& d : kDTypes) s += (s.empty() ? "" : ", ") + std::string(d.name);
  return s;
}

bool is_exact_uint(const json::Value& v) {
  return v.is_number() && v.number >= 0 && v.number <= kMaxExactInt && std::floor(v.number) == v.number;
}

// Byte count of a tensor; false on 64-bit overflow.
bool tensor_bytes(const std::vector<int64_t>& shape, DType dtype, uint64_t* out) {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return false;
  *out = n;
  return true;
}

// Reports where a top-level key of the (already parsed, so well-formed) header starts, for error messages.
uint64_t key_offset(std::string_view text, const std::string& key) {
  int depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
    } else if (c == '"') {
      size_t start = i;
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\') ++i;
      size_t j = i + 1;
      while (j < text.size() && (text[j] == ' ' || text[j] == '\t' || text[j] == '\n' || text[j] == '\r')) ++j;
      if (depth == 1 && j < text.size() && text[j] == ':' &&
          json::parse(text.substr(start, i + 1 - start)).string == key)
        return start;
    }
  }
  return 8;
}

// The reference implementation requires a UTF-8 header; returns the offset of the first bad byte or npos.
size_t invalid_utf8_at(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len;
    uint32_t cp;
    if (c < 0x80) { ++i; continue; }
    if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
    else return i;
    if (i + len > s.size()) return i;
    for (size_t k = 1; k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (cc & 0x3F);
    }
    bool overlong = (len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) return i;
    i += len;
  }
  return std::string_view::npos;
}

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

}  // namespace

const char* dtype_name(DType t) {
  for (const auto& d : kDTypes)
    if (d.type == t) return d.name;
  return "?";
}

size_t dtype_size(DType t) {
  for (const auto& d : kDTypes)
    if (d.type == t) return d.size;
  return 0;
}

bool parse_dtype(const std::string& name, DType* out) {
  for (const auto& d : kDTypes)
    if (name == d.name) {
      *out = d.type;
      return true;
    }
  return false;
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// ---- Reader ----

Reader::Reader(const std::string& path) : file_(path) {
  const uint64_t size = file_.size();
  if (size < 8)
    fail(path + ": file is " + std::to_string(size) + " bytes, too short for the 8-byte header length (byte 0)" +
         kFix);
  uint64_t n;
  std::memcpy(&n, file_.data(), 8);
  if (n > size - 8)
    fail(path + ": header length " + std::to_string(n) + " exceeds file size " + std::to_string(size) + " (byte 0)" +
         kFix);
  if (n > kMaxHeaderBytes)
    fail(path + ": header length " + std::to_string(n) + " exceeds the " + std::to_string(kMaxHeaderBytes) +
         "-byte limit (byte 0)" + kFix);
  data_start_ = 8 + n;
  if (n == 0 || file_.data()[8] != '{')
    fail(path + ": header must be a JSON object starting with '{' (byte 8); this is not a safetensors file" +
         std::string(kFix));
  std::string_view raw(reinterpret_cast<const char*>(file_.data()) + 8, n);
  if (size_t bad = invalid_utf8_at(raw); bad != std::string_view::npos)
    fail(path + ": header is not valid UTF-8 (byte " + std::to_string(8 + bad) + ")" + kFix);
  // Eight leading spaces make the JSON parser's byte offsets equal file offsets.
  validate(std::string(8, ' ').append(raw));
}

void Reader::validate(const std::string& text) {
  const std::string& path = file_.path();
  json::Value root;
  try {
    root = json::parse(text, path + " header");
  } catch (const EngineError& e) {
    fail(e.what() + std::string(" (offsets are file bytes)") + kFix);
  }
  // The text starts with '{' (checked by the caller), so a successful parse is an object.
  const uint64_t buffer_size = file_.size() - data_start_;
  for (const auto& [key, val] : root.object) {
    auto bad = [&](const std::string& reason) {
      fail(path + ": tensor '" + key + "': " + reason + " (byte " + std::to_string(key_offset(text, key)) + ")" + kFix);
    };
    if (key == "__metadata__") {
      if (!val.is_object())
        fail(path + ": __metadata__ is " + json::type_name(val.type) + ", expected an object of strings (byte " +
             std::to_string(key_offset(text, key)) + ")" + kFix);
      for (const auto& [mk, mv] : val.object) {
        if (!mv.is_string())
          fail(path + ": __metadata__ '" + mk + "' is " + json::type_name(mv.type) + ", expected a string (byte " +
               std::to_string(key_offset(text, key)) + ")" + kFix);
        metadata_[mk] = mv.string;
      }
      continue;
    }
    if (!val.is_object()) bad(std::string("entry is ") + json::type_name(val.type) + ", expected an object");
    for (const auto& [field, fv] : val.object)
      if (field != "dtype" && field != "shape" && field != "data_offsets")
        bad("unexpected field '" + field + "'; an entry has exactly dtype, shape and data_offsets");

    TensorInfo t;
    t.name = key;
    const json::Value* dtype = val.find("dtype");
    if (!dtype) bad("missing field 'dtype'");
    if (!dtype->is_string()) bad(std::string("dtype is ") + json::type_name(dtype->type) + ", expected a string");
    if (!parse_dtype(dtype->string, &t.dtype))
      bad("unknown dtype '" + dtype->string + "'; supported: " + all_dtype_names());

    const json::Value* shape = val.find("shape");
    if (!shape) bad("missing field 'shape'");
    if (!shape->is_array()) bad(std::string("shape is ") + json::type_name(shape->type) + ", expected an array");
    for (size_t i = 0; i < shape->array.size(); ++i) {
      const json::Value& d = shape->array[i];
      if (!is_exact_uint(d))
        bad("shape[" + std::to_string(i) + "] is " + json::dump(d) + ", expected a non-negative integer");
      t.shape.push_back(static_cast<int64_t>(d.number));
    }
    uint64_t bytes;
    if (!tensor_bytes(t.shape, t.dtype, &bytes))
      bad("shape " + shape_str(t.shape) + " x " + dtype_name(t.dtype) + " overflows a 64-bit byte count");

    const json::Value* offs = val.find("data_offsets");
    if (!offs) bad("missing field 'data_offsets'");
    if (!offs->is_array() || offs->array.size() != 2 || !is_exact_uint(offs->array[0]) ||
        !is_exact_uint(offs->array[1]))
      bad("data_offsets is " + json::dump(*offs) + ", expected [begin, end] with non-negative integers");
    t.begin = static_cast<uint64_t>(offs->array[0].number);
    t.end = static_cast<uint64_t>(offs->array[1].number);
    std::string offs_str = "data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + "]";
    if (t.end < t.begin) bad(offs_str + " end before they begin");
    if (t.end > buffer_size)
      bad(offs_str + " extend past the " + std::to_string(buffer_size) + "-byte data buffer (file bytes " +
          std::to_string(data_start_) + ".." + std::to_string(file_.size()) + ")");
    if (t.end - t.begin != bytes)
      bad(offs_str + " do not match shape " + shape_str(t.shape) + " x " + dtype_name(t.dtype) + " = " +
          std::to_string(bytes) + " bytes");
    index_[key] = tensors_.size();
    tensors_.push_back(std::move(t));
  }

  // The tensors must tile the data buffer exactly: no gaps, no overlaps, nothing after the last one.
  std::vector<const TensorInfo*> order;
  for (const auto& t : tensors_) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t pos = 0;
  const TensorInfo* prev = nullptr;
  for (const TensorInfo* t : order) {
    if (t->begin > pos)
      fail(path + ": gap in the data buffer: bytes [" + std::to_string(pos) + ", " + std::to_string(t->begin) +
           ") before tensor '" + t->name + "' belong to no tensor (byte " + std::to_string(data_start_ + pos) + ")" +
           kFix);
    if (t->begin < pos)
      fail(path + ": tensor '" + t->name + "' data_offsets [" + std::to_string(t->begin) + ", " +
           std::to_string(t->end) + "] overlap tensor '" + prev->name + "', which ends at " + std::to_string(pos) +
           " (byte " + std::to_string(data_start_ + t->begin) + ")" + kFix);
    pos = t->end;
    prev = t;
  }
  if (pos != buffer_size)
    fail(path + ": file is " + std::to_string(file_.size()) + " bytes but its tensors end at byte " +
         std::to_string(data_start_ + pos) + " (8 + header " + std::to_string(data_start_ - 8) + " + data " +
         std::to_string(pos) + "): " + std::to_string(buffer_size - pos) + " trailing bytes belong to no tensor (byte " +
         std::to_string(data_start_ + pos) + ")" + kFix);
}

const TensorInfo* Reader::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& Reader::get(const std::string& name) const {
  const TensorInfo* t = find(name);
  if (!t)
    fail(path() + ": no tensor named '" + name + "' (the file has " + std::to_string(tensors_.size()) +
         " tensors); check that the checkpoint matches the model config");
  return *t;
}

void Reader::read_f32(const std::string& name, float* dst, const std::vector<int64_t>& expected_shape) const {
  read_f32(get(name), dst, expected_shape);
}

void Reader::read_f32(const TensorInfo& t, float* dst, const std::vector<int64_t>& expected_shape) const {
  if (t.shape != expected_shape)
    fail(path() + ": tensor '" + t.name + "' has shape " + shape_str(t.shape) + ", expected " +
         shape_str(expected_shape) + "; check that the checkpoint matches the model config");
  read_f32_range(t, dst, 0, static_cast<size_t>(t.numel()));
}

void Reader::read_f32_range(const TensorInfo& t, float* dst, size_t first, size_t n) const {
  if (first + n > static_cast<size_t>(t.numel()))
    fail(path() + ": tensor '" + t.name + "': elements [" + std::to_string(first) + ", " + std::to_string(first + n) +
         ") are outside its " + std::to_string(t.numel()) + " elements");
  const size_t size = t.dtype == DType::F32 || t.dtype == DType::F16 || t.dtype == DType::BF16 || t.dtype == DType::F64
                          ? dtype_size(t.dtype)
                          : 0;
  if (!size)
    fail(path() + ": tensor '" + t.name + "' has dtype " + dtype_name(t.dtype) +
         ", expected a float dtype (F32, F16, BF16 or F64)");
  const uint8_t* src = data(t) + first * size;
  switch (t.dtype) {
    case DType::F32:
      if (n) std::memcpy(dst, src, n * 4);
      break;
    case DType::F16:
      for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(load_u16(src + 2 * i));
      break;
    case DType::BF16:
      for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(load_u16(src + 2 * i));
      break;
    default:  // F64
      for (size_t i = 0; i < n; ++i) {
        double d;
        std::memcpy(&d, src + 8 * i, 8);
        dst[i] = static_cast<float>(d);
      }
      break;
  }
  file_.drop(data_start_ + t.begin + first * size, n * size);
}

std::vector<int32_t> Reader::read_i32(const std::string& name) const {
  const TensorInfo& t = get(name);
  const uint8_t* src = data(t);
  std::vector<int32_t> out(static_cast<size_t>(t.numel()));
  if (t.dtype == DType::I32) {
    if (!out.empty()) std::memcpy(out.data(), src, out.size() * 4);
  } else if (t.dtype == DType::I64) {
    for (size_t i = 0; i < out.size(); ++i) {
      int64_t v;
      std::memcpy(&v, src + 8 * i, 8);
      if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
        fail(path() + ": tensor '" + t.name + "' element " + std::to_string(i) + " = " + std::to_string(v) +
             " does not fit in int32");
      out[i] = static_cast<int32_t>(v);
    }
  } else {
    fail(path() + ": tensor '" + t.name + "' has dtype " + dtype_name(t.dtype) + ", expected I32 or I64");
  }
  return out;
}

// ---- Writer ----

void Writer::add_f32(const std::string& name, const float* data, std::vector<int64_t> shape) {
  add(name, DType::F32, data, std::move(shape));
}

void Writer::add(const std::string& name, DType dtype, const void* data, std::vector<int64_t> shape) {
  if (name == "__metadata__") fail("safetensors writer: '__metadata__' is reserved; rename the tensor");
  for (const auto& e : entries_)
    if (e.name == name) fail("safetensors writer: tensor '" + name + "' added twice; tensor names must be unique");
  uint64_t bytes;
  if (!tensor_bytes(shape, dtype, &bytes))
    fail("safetensors writer: tensor '" + name + "' has an invalid shape " + shape_str(shape) +
         " (negative or overflowing dimensions)");
  if (bytes > 0 && !data) fail("safetensors writer: tensor '" + name + "' has no data");
  entries_.push_back({name, dtype, data, std::move(shape), bytes, 1, {}});
}

void Writer::add_f32_streamed(const std::string& name, std::vector<int64_t> shape,
                              std::function<const float*()> data) {
  add_streamed(name, DType::F32, std::move(shape), [data = std::move(data)]() -> const void* { return data(); });
}

void Writer::add_streamed(const std::string& name, DType dtype, std::vector<int64_t> shape,
                          std::function<const void*()> data) {
  add_streamed_pieces(name, dtype, std::move(shape), 1, [data = std::move(data)](size_t) { return data(); });
}

void Writer::add_streamed_pieces(const std::string& name, DType dtype, std::vector<int64_t> shape, size_t pieces,
                                 std::function<const void*(size_t)> data) {
  static const double kPlaceholder = 0;  // checked by add(); replaced at write time
  add(name, dtype, &kPlaceholder, std::move(shape));
  Entry& e = entries_.back();
  const uint64_t rows = e.shape.empty() ? 1 : static_cast<uint64_t>(e.shape[0]);
  if (pieces == 0 || rows % pieces != 0)
    fail("safetensors writer: tensor '" + name + "' (first dimension " + std::to_string(rows) +
         ") does not split into " + std::to_string(pieces) + " equal pieces");
  e.pieces = pieces;
  e.piece = std::move(data);
}

void Writer::set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }

void Writer::write(const std::string& path) const {
  json::Value header = json::Value::make_object();
  if (!metadata_.empty()) {
    json::Value meta = json::Value::make_object();
    for (const auto& [k, v] : metadata_) meta.set(k, json::Value::of(v));
    header.set("__metadata__", std::move(meta));
  }
  uint64_t offset = 0;
  for (const auto& e : entries_) {
    json::Value entry = json::Value::make_object();
    entry.set("dtype", json::Value::of(dtype_name(e.dtype)));
    json::Value shape = json::Value::make_array();
    for (int64_t d : e.shape) shape.push(json::Value::of(d));
    entry.set("shape", std::move(shape));
    json::Value offs = json::Value::make_array();
    offs.push(json::Value::of(static_cast<int64_t>(offset)));
    offs.push(json::Value::of(static_cast<int64_t>(offset + e.bytes)));
    entry.set("data_offsets", std::move(offs));
    header.object.emplace_back(e.name, std::move(entry));  // names were checked unique in add()
    offset += e.bytes;
  }
  std::string text = json::dump(header);
  text.append((8 - text.size() % 8) % 8, ' ');
  fs::write_file_atomic(path, [&](fs::FileSink& sink) {
    uint64_t n = text.size();
    sink.write(&n, 8);
    sink.write(text);
    for (const auto& e : entries_) {
      if (!e.piece) sink.write(e.data, e.bytes);
      for (size_t k = 0; e.piece && k < e.pieces; ++k) sink.write(e.piece(k), e.bytes / e.pieces);
    }
  });
}

// ---- TensorSet ----

TensorSet::TensorSet(const std::string& path) : path_(path) {
  std::string single = fs::is_dir(path) ? fs::join(path, "model.safetensors") : path;
  if (!fs::is_dir(path) && !fs::exists(path))
    fail(path + ": not found; pass a checkpoint directory or a .safetensors file");
  if (fs::exists(single)) {
    readers_.push_back(std::make_unique<Reader>(single));
    for (const auto& t : readers_.back()->tensors()) entries_[t.name] = {readers_.back().get(), &t};
    return;
  }
  std::string index = fs::join(path, "model.safetensors.index.json");
  if (!fs::exists(index))
    fail(path + ": neither model.safetensors nor model.safetensors.index.json found; pass a directory holding a "
                "safetensors checkpoint");
  open_index(index);
}

void TensorSet::open_index(const std::string& index_path) {
  json::Value root = json::parse(fs::read_file(index_path, kMaxIndexBytes), index_path);
  const json::Value* map = root.is_object() ? root.find("weight_map") : nullptr;
  if (!map || !map->is_object())
    fail(index_path + ": expected an object with a \"weight_map\" object mapping tensor names to shard files");
  std::map<std::string, const Reader*> shards;
  for (const auto& [name, file] : map->object) {
    if (!file.is_string())
      fail(index_path + ": weight_map['" + name + "'] is " + json::type_name(file.type) +
           ", expected a shard file name");
    const std::string& f = file.string;
    if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..")
      fail(index_path + ": weight_map['" + name + "'] = '" + f +
           "' is not a file name in the checkpoint directory; shards must sit beside the index");
    auto it = shards.find(f);
    if (it == shards.end()) {
      std::string shard_path = fs::join(path_, f);
      if (!fs::exists(shard_path))
        fail(index_path + ": shard '" + f + "' (holding tensor '" + name + "') is missing: " + shard_path +
             " not found; download every shard listed in the index");
      readers_.push_back(std::make_unique<Reader>(shard_path));
      it = shards.emplace(f, readers_.back().get()).first;
    }
    const TensorInfo* info = it->second->find(name);
    if (!info)
      fail(index_path + ": tensor '" + name + "' is listed in shard '" + f +
           "' but that shard has no such tensor; the index and shards are from different checkpoints, re-download them");
    entries_[name] = {it->second, info};
  }
}

const TensorSet::Entry* TensorSet::find(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

void TensorSet::read_f32(const std::string& name, float* dst, const std::vector<int64_t>& expected_shape) const {
  const Entry* e = find(name);
  if (!e)
    fail(path_ + ": checkpoint has no tensor named '" + name + "' (it has " + std::to_string(entries_.size()) +
         " tensors); check that the checkpoint matches the model config");
  e->reader->read_f32(*e->info, dst, expected_shape);
}

}  // namespace moe::st
