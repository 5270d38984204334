// Safetensors reader/writer, sharded checkpoints, half-precision conversions, and rejection of corrupt files.
#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/half.h"
#include "test_files.h"
#include "testing.h"
#include "train/safetensors.h"

using namespace moe;
using moe_test::expect_error;
using moe_test::tmp_dir;
using moe_test::tmp_path;
using moe_test::write_raw;


namespace {

std::string u64le(uint64_t n) {
  std::string s(8, '\0');
  std::memcpy(s.data(), &n, 8);
  return s;
}

// A file built by hand: length prefix, header text, raw data.
std::string st_bytes(const std::string& header, const std::string& data) { return u64le(header.size()) + header + data; }

// Runs f, expecting an EngineError whose message contains `needle`.
bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

}  // namespace

TEST(half_f16_exhaustive_round_trip) {
  int bad = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = f16_to_f32(static_cast<uint16_t>(h));
    uint16_t back = f32_to_f16(f);
    bool nan = ((h >> 10) & 0x1F) == 0x1F && (h & 0x3FF);
    if (nan ? !(std::isnan(f) && ((back & 0x7C00) == 0x7C00) && (back & 0x3FF)) : back != h) ++bad;
  }
  CHECK_MSG(bad == 0, std::to_string(bad) + " f16 values did not round-trip");
  CHECK(f16_to_f32(0x3C00) == 1.0f);
  CHECK(f16_to_f32(0x7BFF) == 65504.0f);
  CHECK(f16_to_f32(0x0001) == std::ldexp(1.0f, -24));
  CHECK(f16_to_f32(0x8000) == 0.0f && std::signbit(f16_to_f32(0x8000)));
}

TEST(half_f16_rounding) {
  CHECK(f32_to_f16(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);          // tie -> even (down)
  CHECK(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3C02);      // tie -> even (up)
  CHECK(f32_to_f16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)) == 0x3C01);  // above tie
  CHECK(f32_to_f16(65519.0f) == 0x7BFF);
  CHECK(f32_to_f16(65520.0f) == 0x7C00);
  CHECK(f32_to_f16(-1e30f) == 0xFC00);
  CHECK(f32_to_f16(std::numeric_limits<float>::infinity()) == 0x7C00);
  CHECK(f32_to_f16(std::ldexp(1.0f, -25)) == 0x0000);                  // tie between 0 and min subnormal -> 0
  CHECK(f32_to_f16(std::ldexp(1.5f, -25)) == 0x0001);
  CHECK(f32_to_f16(std::ldexp(3.0f, -25)) == 0x0002);                  // 1.5 subnormal steps -> even 2
  CHECK(f32_to_f16(std::ldexp(1023.5f, -24)) == 0x0400);               // rounds up into the normal range
  CHECK(f32_to_f16(1e-10f) == 0x0000);
  CHECK(f32_to_f16(-0.0f) == 0x8000);
  uint16_t nan = f32_to_f16(std::nanf(""));
  CHECK((nan & 0x7C00) == 0x7C00 && (nan & 0x3FF) != 0);
}

TEST(half_bf16) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = bf16_to_f32(static_cast<uint16_t>(h));
    if (!std::isnan(f)) CHECK(f32_to_bf16(f) == h);
  }
  CHECK(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)) == 0x3F80);      // tie -> even (down)
  CHECK(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3F82);  // tie -> even (up)
  CHECK(f32_to_bf16(std::numeric_limits<float>::max()) == 0x7F80);
  CHECK(std::isnan(bf16_to_f32(f32_to_bf16(std::nanf("")))));
  CHECK(std::isnan(bf16_to_f32(f32_to_bf16(std::bit_cast<float>(0x7F800001u)))));  // payload only in low bits
}

TEST(round_trip_all_dtypes) {
  std::vector<float> a = moe_test::random_vector(6 * 5, 1);
  std::vector<uint16_t> b(12), h(7);
  std::vector<float> bsrc = moe_test::random_vector(12, 2, 10.0f), hsrc = moe_test::random_vector(7, 3, 100.0f);
  for (size_t i = 0; i < b.size(); ++i) b[i] = f32_to_bf16(bsrc[i]);
  for (size_t i = 0; i < h.size(); ++i) h[i] = f32_to_f16(hsrc[i]);
  std::vector<int32_t> ids = {1, -2, 3, 2147483647, -2147483647 - 1};
  std::vector<int64_t> ids64 = {5, -6, 7};
  st::Writer w;
  w.add_f32("wte", a.data(), {6, 5});
  w.add("b", st::DType::BF16, b.data(), {3, 4});
  w.add("h", st::DType::F16, h.data(), {7});
  w.add("ids", st::DType::I32, ids.data(), {5});
  w.add("ids64", st::DType::I64, ids64.data(), {3});
  w.add("empty", st::DType::F32, nullptr, {0, 3});
  w.add_f32("scalar", a.data(), {});
  w.set_metadata("format", "pt");
  w.set_metadata("step", "12");
  std::string path = tmp_path("rt.safetensors");
  w.write(path);

  st::Reader r(path);
  CHECK(r.tensors().size() == 7);
  CHECK(r.tensors()[0].name == "wte" && r.tensors()[6].name == "scalar");  // insertion order
  CHECK(r.metadata().at("format") == "pt" && r.metadata().at("step") == "12");
  std::vector<float> out(30);
  r.read_f32("wte", out.data(), {6, 5});
  CHECK(std::memcmp(out.data(), a.data(), 30 * 4) == 0);
  r.read_f32("b", out.data(), {3, 4});
  for (size_t i = 0; i < 12; ++i) CHECK(same_bits(out[i], bf16_to_f32(b[i])));
  for (size_t i = 0; i < 12; ++i) CHECK(std::fabs(out[i] - bsrc[i]) <= std::fabs(bsrc[i]) * 0x1p-8f);
  r.read_f32("h", out.data(), {7});
  for (size_t i = 0; i < 7; ++i) CHECK(std::fabs(out[i] - hsrc[i]) <= std::fabs(hsrc[i]) * 0x1p-11f);
  CHECK(r.read_i32("ids") == ids);
  CHECK((r.read_i32("ids64") == std::vector<int32_t>{5, -6, 7}));
  r.read_f32("empty", out.data(), {0, 3});
  r.read_f32("scalar", out.data(), {});
  CHECK(out[0] == a[0]);
  const st::TensorInfo* t = r.find("b");
  CHECK(t && t->dtype == st::DType::BF16 && t->numel() == 12 && t->end - t->begin == 24);
  CHECK(r.find("nope") == nullptr);

  // The header is padded to a multiple of 8 so the data buffer is aligned.
  std::string bytes = fs::read_file(path, 1 << 20);
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  CHECK(n % 8 == 0 && bytes[8] == '{');

  expect_error([&] { r.read_f32("wte", out.data(), {5, 6}); }, "tensor 'wte' has shape [6, 5], expected [5, 6]",
               "shape mismatch");
  expect_error([&] { r.read_f32("ids", out.data(), {5}); }, "tensor 'ids' has dtype I32", "dtype mismatch");
  expect_error([&] { r.read_f32("missing", out.data(), {1}); }, "no tensor named 'missing'", "absent tensor");
  expect_error([&] { r.read_i32("wte"); }, "expected I32 or I64", "read_i32 of floats");
}

TEST(read_i64_range_checked) {
  std::vector<int64_t> big = {1, int64_t{1} << 40};
  st::Writer w;
  w.add("big", st::DType::I64, big.data(), {2});
  std::string path = tmp_path("i64.safetensors");
  w.write(path);
  expect_error([&] { st::Reader(path).read_i32("big"); }, "element 1 = 1099511627776 does not fit in int32", "i64");
}

TEST(writer_rejects_bad_input) {
  float x = 0;
  st::Writer w;
  w.add_f32("a", &x, {1});
  expect_error([&] { w.add_f32("a", &x, {1}); }, "added twice", "duplicate");
  expect_error([&] { w.add_f32("__metadata__", &x, {1}); }, "reserved", "reserved name");
  expect_error([&] { w.add_f32("neg", &x, {-1}); }, "invalid shape [-1]", "negative dim");
  expect_error([&] { w.add_f32("null", nullptr, {1}); }, "has no data", "null data");
}

// A tensor streamed in pieces (a fused expert tensor an expert's slab at a time) is the file add() writes, each piece
// asked for once, in order; a tensor that does not split evenly is refused by name.
TEST(writer_streams_a_tensor_in_pieces) {
  std::vector<float> all(4 * 6);
  for (size_t i = 0; i < all.size(); ++i) all[i] = 0.5f * static_cast<float>(i) - 3.0f;
  st::Writer whole, pieces;
  whole.add_f32("t", all.data(), {4, 2, 3});
  std::vector<size_t> asked;
  std::vector<float> piece(6);
  pieces.add_streamed_pieces("t", st::DType::F32, {4, 2, 3}, 4, [&](size_t k) {
    asked.push_back(k);
    std::copy(all.begin() + k * 6, all.begin() + (k + 1) * 6, piece.begin());
    return static_cast<const void*>(piece.data());
  });
  whole.write(tmp_path("pieces_whole.safetensors"));
  pieces.write(tmp_path("pieces.safetensors"));
  CHECK(fs::read_file(tmp_path("pieces_whole.safetensors"), 1 << 20) == fs::read_file(tmp_path("pieces.safetensors"), 1 << 20));
  CHECK((asked == std::vector<size_t>{0, 1, 2, 3}));
  st::Writer uneven;
  expect_error([&] { uneven.add_streamed_pieces("odd", st::DType::F32, {5, 3}, 2, [](size_t) -> const void* { return nullptr; }); },
               {"'odd'", "2 equal pieces"}, "uneven pieces");
}

TEST(hand_written_header) {
  // Unsorted entries, metadata, non-8-multiple header with trailing spaces, an F16 and an F32 tensor.
  std::string header =
      R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[4,12]},)"
      R"("__metadata__":{"format":"pt"},"h":{"shape":[2],"dtype":"F16","data_offsets":[0,4]}}   )";
  std::string data;
  uint16_t hv[2] = {0x3C00, 0xC000};  // 1.0, -2.0
  float wv[2] = {0.5f, -7.25f};
  data.append(reinterpret_cast<const char*>(hv), 4);
  data.append(reinterpret_cast<const char*>(wv), 8);
  std::string path = tmp_path("hand.safetensors");
  write_raw(path, st_bytes(header, data));
  st::Reader r(path);
  CHECK(r.tensors().size() == 2 && r.tensors()[0].name == "w");
  CHECK(r.metadata().size() == 1 && r.metadata().at("format") == "pt");
  float out[2];
  r.read_f32("h", out, {2});
  CHECK(out[0] == 1.0f && out[1] == -2.0f);
  r.read_f32("w", out, {2});
  CHECK(out[0] == 0.5f && out[1] == -7.25f);

  // Empty checkpoint: "{}" and no data.
  write_raw(path, st_bytes("{}", ""));
  CHECK(st::Reader(path).tensors().empty());
  // Zero-size tensors may share an offset.
  write_raw(path, st_bytes(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},)"
                           R"("b":{"dtype":"I8","shape":[3,0],"data_offsets":[0,0]}})",
                           ""));
  CHECK(st::Reader(path).tensors().size() == 2);
}

TEST(corrupted_files_rejected) {
  auto entry = [](const std::string& name, const std::string& dtype, const std::string& shape, const std::string& offs) {
    return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":" + offs + "}";
  };
  std::string four(4, 'x'), eight(8, 'x'), twelve(12, 'x');
  struct Case {
    const char* label;
    std::string bytes;
    std::string expect;
  };
  std::vector<Case> cases = {
      {"empty file", "", "too short for the 8-byte header length (byte 0)"},
      {"truncated header length", "abc", "file is 3 bytes, too short"},
      {"header length > file", u64le(1000000000000ull) + "{}", "header length 1000000000000 exceeds file size 10 (byte 0)"},
      {"header length one past the end", u64le(3) + "{}", "header length 3 exceeds file size 10"},
      {"empty header", u64le(0), "must be a JSON object starting with '{' (byte 8)"},
      {"non-object header", st_bytes("[1,2]", ""), "must be a JSON object starting with '{' (byte 8)"},
      {"leading space", st_bytes(" {}", ""), "starting with '{'"},
      {"invalid JSON", st_bytes(R"({"a": })", ""), "invalid JSON at byte 14"},
      {"truncated JSON", st_bytes(R"({"a":{"dtype":"F32")", ""), "invalid JSON at byte 27"},
      {"duplicate names", st_bytes("{" + entry("a", "F32", "[1]", "[0,4]") + "," + entry("a", "F32", "[1]", "[4,8]") + "}", eight),
       "duplicate key \"a\""},
      {"invalid UTF-8", st_bytes("{\"\xff\":1}", ""), "not valid UTF-8 (byte 10)"},
      {"overlong UTF-8", st_bytes("{\"\xc0\xaf\":1}", ""), "not valid UTF-8 (byte 10)"},
      {"entry not an object", st_bytes(R"({"a":5})", ""), "tensor 'a': entry is a number, expected an object (byte 9)"},
      {"unknown dtype", st_bytes("{" + entry("a", "F17", "[1]", "[0,4]") + "}", four), "unknown dtype 'F17'"},
      {"dtype not a string", st_bytes(R"({"a":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})", four),
       "dtype is a number, expected a string"},
      {"shape/offsets mismatch", st_bytes("{" + entry("wte", "F32", "[5,8]", "[0,100]") + "}", std::string(100, 'x')),
       "tensor 'wte': data_offsets [0, 100] do not match shape [5, 8] x F32 = 160 bytes (byte 9)"},
      {"gap", st_bytes("{" + entry("a", "F32", "[1]", "[0,4]") + "," + entry("b", "F32", "[1]", "[8,12]") + "}", twelve),
       "gap in the data buffer: bytes [4, 8) before tensor 'b'"},
      {"gap at start", st_bytes("{" + entry("a", "F32", "[1]", "[4,8]") + "}", eight), "bytes [0, 4) before tensor 'a'"},
      {"overlap", st_bytes("{" + entry("a", "F32", "[2]", "[0,8]") + "," + entry("b", "F32", "[2]", "[4,12]") + "}", twelve),
       "tensor 'b' data_offsets [4, 12] overlap tensor 'a'"},
      {"offsets past the end", st_bytes("{" + entry("a", "F32", "[2]", "[0,8]") + "}", four),
       "data_offsets [0, 8] extend past the 4-byte data buffer"},
      {"end before begin", st_bytes("{" + entry("a", "F32", "[0]", "[4,0]") + "}", four), "end before they begin"},
      {"trailing garbage", st_bytes("{" + entry("a", "F32", "[1]", "[0,4]") + "}", four + "zzz"),
       "3 trailing bytes belong to no tensor"},
      {"negative dim", st_bytes("{" + entry("a", "F32", "[-1]", "[0,4]") + "}", four),
       "shape[0] is -1, expected a non-negative integer"},
      {"fractional dim", st_bytes("{" + entry("a", "F32", "[1, 1.5]", "[0,4]") + "}", four),
       "shape[1] is 1.5, expected a non-negative integer"},
      {"dims overflow", st_bytes("{" + entry("a", "F32", "[4294967296,4294967296,16]", "[0,4]") + "}", four),
       "overflows a 64-bit byte count"},
      {"dim beyond 2^53", st_bytes("{" + entry("a", "U8", "[1e300]", "[0,4]") + "}", four),
       "expected a non-negative integer"},
      {"shape not an array", st_bytes("{" + entry("a", "F32", "4", "[0,4]") + "}", four), "shape is a number"},
      {"offsets wrong arity", st_bytes("{" + entry("a", "F32", "[1]", "[0]") + "}", four),
       "data_offsets is [0], expected [begin, end]"},
      {"negative offset", st_bytes("{" + entry("a", "F32", "[1]", "[-4,0]") + "}", four), "expected [begin, end]"},
      {"missing data_offsets", st_bytes(R"({"a":{"dtype":"F32","shape":[1]}})", four), "missing field 'data_offsets'"},
      {"missing dtype", st_bytes(R"({"a":{"shape":[1],"data_offsets":[0,4]}})", four), "missing field 'dtype'"},
      {"missing shape", st_bytes(R"({"a":{"dtype":"F32","data_offsets":[0,4]}})", four), "missing field 'shape'"},
      {"extra field", st_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", four),
       "unexpected field 'x'"},
      {"metadata not an object", st_bytes(R"({"__metadata__":[]})", ""), "__metadata__ is an array"},
      {"metadata value not a string", st_bytes(R"({"__metadata__":{"k":1}})", ""), "__metadata__ 'k' is a number"},
  };
  std::string path = tmp_path("bad.safetensors");
  for (const auto& c : cases) {
    write_raw(path, c.bytes);
    expect_error([&] { st::Reader r(path); }, c.expect, c.label);
  }
  // Every message names the file.
  write_raw(path, "abc");
  expect_error([&] { st::Reader r(path); }, path + ": ", "names the file");
  expect_error([&] { st::Reader r(tmp_path("does_not_exist.safetensors")); }, "cannot open", "missing file");
}

TEST(header_over_size_cap_rejected) {
  // A sparse 120 MB file whose header claims 110 MB: within the file, beyond the 100 MB cap.
  std::string path = tmp_path("huge.safetensors");
  write_raw(path, u64le(110'000'000) + "{");
  CHECK(::truncate(path.c_str(), 120'000'000) == 0);
  expect_error([&] { st::Reader r(path); }, "header length 110000000 exceeds the 100000000-byte limit (byte 0)",
               "header cap");
  fs::remove_all(path);
}

TEST(fuzz_mutations_fail_cleanly) {
  std::vector<float> a = moe_test::random_vector(24, 7);
  std::vector<uint16_t> b(10, 0x3F80);
  std::vector<int32_t> ids = {1, 2, 3};
  st::Writer w;
  w.add_f32("layers.0.w", a.data(), {4, 6});
  w.add("b", st::DType::BF16, b.data(), {2, 5});
  w.add("ids", st::DType::I32, ids.data(), {3});
  w.set_metadata("format", "pt");
  std::string valid_path = tmp_path("fuzz_src.safetensors");
  w.write(valid_path);
  const std::string valid = fs::read_file(valid_path, 1 << 20);
  uint64_t header_len;
  std::memcpy(&header_len, valid.data(), 8);

  const std::string path = tmp_path("fuzz.safetensors");
  const char specials[] = "{}[]\":,-0123456789e. \\";
  int ok = 0, rejected = 0;
  std::vector<float> sink(64);
  for (uint64_t iter = 0; iter < 4000; ++iter) {
    auto rnd = [&](uint64_t k, uint64_t mod) { return moe::random_u64(2024, iter, k) % mod; };
    std::string m = valid;
    switch (rnd(0, 5)) {
      case 0:  // flip random bytes anywhere
        for (uint64_t k = 0, n = 1 + rnd(1, 4); k < n; ++k) m[rnd(2 + k, m.size())] ^= static_cast<char>(1 + rnd(10 + k, 255));
        break;
      case 1:  // truncate
        m.resize(rnd(1, m.size()));
        break;
      case 2:  // JSON-significant character inside the header
        m[8 + rnd(1, header_len)] = specials[rnd(2, sizeof specials - 1)];
        break;
      case 3:  // insert or delete a byte in the header
        if (rnd(1, 2)) m.insert(m.begin() + 8 + rnd(2, header_len), static_cast<char>(rnd(3, 256)));
        else m.erase(m.begin() + 8 + rnd(2, header_len));
        break;
      default:  // corrupt the length prefix
        m[rnd(1, 8)] = static_cast<char>(rnd(2, 256));
        break;
    }
    write_raw(path, m);
    try {
      st::Reader r(path);
      for (const auto& t : r.tensors()) {
        if (t.dtype == st::DType::I32 || t.dtype == st::DType::I64) {
          r.read_i32(t.name);
        } else if (t.numel() <= 64) {
          r.read_f32(t, sink.data(), t.shape);
        }
      }
      ++ok;
    } catch (const EngineError&) {
      ++rejected;
    }
  }
  CHECK(ok + rejected == 4000);
  CHECK_MSG(rejected > 3000, "only " + std::to_string(rejected) + " of 4000 mutations were rejected");
  CHECK_MSG(ok > 0, "no mutation survived (flips inside tensor data should)");
}

TEST(tensor_set_single_and_sharded) {
  std::vector<float> a = moe_test::random_vector(8, 11), b = moe_test::random_vector(3, 12);
  std::string single = tmp_path("ckpt_single");
  fs::mkdirs(single);
  st::Writer w;
  w.add_f32("a", a.data(), {2, 4});
  w.add_f32("b", b.data(), {3});
  w.write(fs::join(single, "model.safetensors"));
  {
    st::TensorSet set(single);
    CHECK(set.entries().size() == 2 && set.find("a") && !set.find("c"));
    std::vector<float> out(8);
    set.read_f32("a", out.data(), {2, 4});
    CHECK(out == a);
    st::TensorSet file_set(fs::join(single, "model.safetensors"));
    CHECK(file_set.entries().size() == 2);
    expect_error([&] { set.read_f32("c", out.data(), {1}); }, "no tensor named 'c'", "absent in set");
  }

  std::string sharded = tmp_path("ckpt_sharded");
  fs::mkdirs(sharded);
  st::Writer w1, w2;
  w1.add_f32("a", a.data(), {2, 4});
  w2.add_f32("b", b.data(), {3});
  w1.write(fs::join(sharded, "model-00001-of-00002.safetensors"));
  w2.write(fs::join(sharded, "model-00002-of-00002.safetensors"));
  std::string index_path = fs::join(sharded, "model.safetensors.index.json");
  fs::write_file_atomic(index_path, R"({"metadata":{"total_size":44},"weight_map":{)"
                                    R"("a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}})");
  {
    st::TensorSet set(sharded);
    CHECK(set.entries().size() == 2);
    std::vector<float> out(3);
    set.read_f32("b", out.data(), {3});
    CHECK(out == b);
    CHECK(set.find("a")->reader != set.find("b")->reader);
  }

  fs::write_file_atomic(index_path, R"({"weight_map":{"a":"model-00001-of-00002.safetensors","c":"model-00003.safetensors"}})");
  expect_error([&] { st::TensorSet s(sharded); }, "shard 'model-00003.safetensors' (holding tensor 'c') is missing",
               "missing shard");
  fs::write_file_atomic(index_path, R"({"weight_map":{"b":"model-00001-of-00002.safetensors"}})");
  expect_error([&] { st::TensorSet s(sharded); },
               "tensor 'b' is listed in shard 'model-00001-of-00002.safetensors' but that shard has no such tensor",
               "tensor absent from shard");
  fs::write_file_atomic(index_path, R"({"weight_map":{"a":"../escape.safetensors"}})");
  expect_error([&] { st::TensorSet s(sharded); }, "is not a file name in the checkpoint directory", "path escape");
  fs::write_file_atomic(index_path, R"({"weights":{}})");
  expect_error([&] { st::TensorSet s(sharded); }, "\"weight_map\" object", "no weight_map");
  fs::write_file_atomic(index_path, R"({"weight_map":{"a":"x.safetensors",})");
  expect_error([&] { st::TensorSet s(sharded); }, "model.safetensors.index.json: invalid JSON at byte", "bad index");

  std::string empty = tmp_path("ckpt_empty");
  fs::mkdirs(empty);
  expect_error([&] { st::TensorSet s(empty); }, "neither model.safetensors nor model.safetensors.index.json",
               "empty dir");
  expect_error([&] { st::TensorSet s(tmp_path("nowhere")); }, "not found", "missing path");
}

TEST(cleanup) { fs::remove_all(tmp_dir()); }

TEST_MAIN()
