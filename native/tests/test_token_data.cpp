// Token shard files: round trips, header validation, batching per docs/model.md, and the tokenize command.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>

#include "core/error.h"
#include "core/fsutil.h"
#include "test_files.h"
#include "testing.h"
#include "train/token_data.h"

using namespace moe;
using moe_test::expect_error;
using moe_test::tmp_dir;
using moe_test::tmp_path;
using moe_test::write_raw;


namespace {

template <typename T>
void put(std::string& s, size_t offset, T v) {
  std::memcpy(s.data() + offset, &v, sizeof v);
}

std::vector<uint32_t> iota_tokens(size_t n, uint32_t mod) {
  std::vector<uint32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = static_cast<uint32_t>((i * 7 + 3) % mod);
  return t;
}

}  // namespace

TEST(round_trip_uint16_and_uint32) {
  std::vector<uint32_t> tokens = iota_tokens(1000, 256);
  std::string p16 = tmp_path("t16.bin");
  write_token_file(p16, tokens, nullptr, 2, 256);
  TokenData d16(p16);
  CHECK(d16.size() == 1000 && d16.token_bytes() == 2 && d16.vocab_size() == 256 && !d16.has_mask());
  bool same = true;
  for (uint64_t i = 0; i < d16.size(); ++i) same = same && d16.token(i) == tokens[i] && d16.mask(i) == 1;
  CHECK(same);
  CHECK(fs::read_file(p16, 1 << 20).size() == 64 + 2000);
  d16.validate_max_token(256);

  std::vector<uint32_t> big = {0, 70000, 4000000000u, 5};
  std::vector<uint8_t> mask = {0, 1, 1, 0};
  std::string p32 = tmp_path("t32.bin");
  write_token_file(p32, big, &mask, 4, 0);
  TokenData d32(p32);
  CHECK(d32.size() == 4 && d32.token_bytes() == 4 && d32.vocab_size() == 0 && d32.has_mask());
  CHECK(d32.token(2) == 4000000000u && d32.mask(0) == 0 && d32.mask(1) == 1 && d32.mask(3) == 0);
  CHECK(fs::read_file(p32, 1 << 20).size() == 64 + 16 + 4);
  expect_error([&] { d32.token(4); }, "token index 4 is past the end", "out of range");

  std::string empty = tmp_path("empty.bin");
  write_token_file(empty, {}, nullptr, 2, 0);
  CHECK(TokenData(empty).size() == 0);
}

TEST(header_layout_is_exact) {
  std::string p = tmp_path("layout.bin");
  std::vector<uint8_t> mask = {1, 0};
  write_token_file(p, {0x0102, 0x0304}, &mask, 2, 1000);
  std::string b = fs::read_file(p, 1 << 20);
  CHECK(b.size() == 64 + 4 + 2);
  CHECK(b.substr(0, 8) == "MOETOK01");
  uint32_t tb, flags, vocab;
  uint64_t n;
  std::memcpy(&tb, b.data() + 8, 4);
  std::memcpy(&flags, b.data() + 12, 4);
  std::memcpy(&n, b.data() + 16, 8);
  std::memcpy(&vocab, b.data() + 24, 4);
  CHECK(tb == 2 && flags == 1 && n == 2 && vocab == 1000);
  CHECK(b.substr(28, 36) == std::string(36, '\0'));
  CHECK(static_cast<uint8_t>(b[64]) == 0x02 && static_cast<uint8_t>(b[65]) == 0x01);  // little-endian
  CHECK(b[68] == 1 && b[69] == 0);
}

TEST(validate_max_token_names_index_and_offset) {
  std::vector<uint32_t> tokens = iota_tokens(50, 256);
  tokens[37] = 300;
  std::string p = tmp_path("vocab.bin");
  write_token_file(p, tokens, nullptr, 2, 0);
  TokenData d(p);
  expect_error([&] { d.validate_max_token(256); }, "token 300 at index 37 (byte 138) is >= the model's vocab_size 256",
               "vocab");
  d.validate_max_token(301);
  expect_error([&] { d.validate_max_token(0); }, "positive vocab size", "vocab 0");
}

TEST(next_batch_windows_and_wrap) {
  std::vector<uint32_t> tokens = iota_tokens(50, 97);
  std::string p = tmp_path("batch.bin");
  write_token_file(p, tokens, nullptr, 2, 97);
  TokenData d(p);
  const int B = 2, T = 8;
  std::vector<int32_t> in(B * T), tg(B * T);
  uint64_t cursor = 0;
  // 50 tokens, windows of 17: cursors 0, 16, 32 (needs 49 <= 50), then 48 leaves 2 < 17 -> wraps to 0.
  for (uint64_t expect_start : {0ull, 16ull, 32ull, 0ull}) {
    uint64_t next = d.next_batch(cursor, B, T, in.data(), tg.data());
    CHECK(next == expect_start + B * T);
    bool ok = true;
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < T; ++t) {
        uint64_t i = expect_start + b * T + t;
        ok = ok && in[b * T + t] == static_cast<int32_t>(tokens[i]) && tg[b * T + t] == static_cast<int32_t>(tokens[i + 1]);
      }
    CHECK(ok);
    cursor = next;
  }
  CHECK(d.next_batch(1000, B, T, in.data(), tg.data()) == B * T);  // a cursor past the end restarts too
  expect_error([&] { d.next_batch(0, 7, 8, in.data(), tg.data()); },
               "50 tokens, fewer than batch_size x seq_len + 1 = 57", "too few tokens");
  expect_error([&] { d.next_batch(0, 0, 7, in.data(), tg.data()); }, "must be positive", "zero batch");
}

TEST(next_batch_masks_targets) {
  std::vector<uint32_t> tokens = {10, 11, 12, 13, 14, 15, 16, 17, 18};
  std::vector<uint8_t> mask = {0, 0, 1, 1, 0, 1, 1, 1, 0};
  std::string p = tmp_path("mask.bin");
  write_token_file(p, tokens, &mask, 2, 256);
  TokenData d(p);
  std::vector<int32_t> in(8), tg(8);
  CHECK(d.next_batch(0, 2, 4, in.data(), tg.data()) == 8);
  CHECK((in == std::vector<int32_t>{10, 11, 12, 13, 14, 15, 16, 17}));
  CHECK((tg == std::vector<int32_t>{-1, 12, 13, -1, 15, 16, 17, -1}));
}

TEST(writer_rejects_bad_input) {
  std::string p = tmp_path("w.bin");
  expect_error([&] { write_token_file(p, {70000}, nullptr, 2, 0); }, "does not fit in uint16", "uint16 overflow");
  expect_error([&] { write_token_file(p, {5, 256}, nullptr, 2, 256); }, "token 256 at index 1 is >= vocab_size 256",
               "vocab");
  std::vector<uint8_t> short_mask = {1};
  expect_error([&] { write_token_file(p, {1, 2}, &short_mask, 2, 0); }, "mask has 1 entries for 2 tokens", "mask size");
  std::vector<uint8_t> bad_mask = {1, 2};
  expect_error([&] { write_token_file(p, {1, 2}, &bad_mask, 2, 0); }, "mask entry 1 is 2", "mask value");
  expect_error([&] { write_token_file(p, {1}, nullptr, 3, 0); }, "token_bytes must be 2 or 4", "token bytes");
  CHECK(!fs::exists(p));
}

TEST(corrupted_files_rejected) {
  std::string good_path = tmp_path("good.bin");
  std::vector<uint8_t> mask = {1, 1, 0, 1};
  write_token_file(good_path, {1, 2, 3, 4}, &mask, 2, 10);
  const std::string good = fs::read_file(good_path, 1 << 20);
  CHECK(good.size() == 64 + 8 + 4);

  struct Case {
    const char* label;
    std::string bytes;
    std::string expect;
  };
  std::vector<Case> cases;
  cases.push_back({"short", good.substr(0, 40), "file is 40 bytes, shorter than the 64-byte token file header (byte 0)"});
  std::string m = good;
  m[3] = 'X';
  cases.push_back({"magic", m, "missing magic \"MOETOK01\""});
  m = good;
  put<uint32_t>(m, 8, 3);
  cases.push_back({"token_bytes", m, "token_bytes is 3, expected 2 (uint16) or 4 (uint32) (byte 8)"});
  m = good;
  put<uint32_t>(m, 12, 5);
  cases.push_back({"flags", m, "unknown flag bits 4 set; only bit 0 (mask) is defined (byte 12)"});
  m = good;
  m[40] = 1;
  cases.push_back({"reserved", m, "reserved header byte is 1, expected 0 (byte 40)"});
  cases.push_back({"truncated", good.substr(0, good.size() - 1),
                   "file is 75 bytes but n_tokens 4 x 2 bytes + mask needs 64 + data = 76 bytes"});
  cases.push_back({"trailing", good + "x", "file is 77 bytes but n_tokens 4"});
  m = good;
  put<uint64_t>(m, 16, ~0ull);
  cases.push_back({"huge n_tokens", m, "needs 64 + data = more than 2^64 bytes"});
  m = good;
  put<uint32_t>(m, 12, 0);
  cases.push_back({"mask bytes counted as tokens", m, "(byte 16)"});
  m = good;
  m[64 + 8 + 2] = 2;
  cases.push_back({"mask value", m, "mask byte of token 2 is 2, expected 0 or 1 (byte 74)"});

  std::string p = tmp_path("bad.bin");
  for (const auto& c : cases) {
    write_raw(p, c.bytes);
    expect_error([&] { TokenData d(p); }, c.expect, c.label);
  }
  expect_error([&] { TokenData d(p); }, "regenerate the file with `moe-engine-dev tokenize`", "says what to do");
  expect_error([&] { TokenData d(tmp_path("absent.bin")); }, "cannot open", "missing");
}

// The tokenize command, run through moe-engine-dev when the test runs under ctest (MOE_DEV_CLI is set).
int run_cli(const std::string& args) {
  const char* cli = std::getenv("MOE_DEV_CLI");
  std::string cmd = std::string(cli) + " " + args + " >" + tmp_path("cli.log") + " 2>&1";
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(tokenize_command) {
  const char* cli = std::getenv("MOE_DEV_CLI");
  if (!cli || !fs::exists(cli)) {
    std::printf("  (skipped: MOE_DEV_CLI not set; run under ctest)\n");
    return;
  }
  std::string txt = tmp_path("in.txt"), out = tmp_path("out.bin");
  write_raw(txt, "hi\xc3\xa9\n");
  CHECK(run_cli("tokenize --bytes " + txt + " --out " + out) == 0);
  TokenData d(out);
  CHECK(d.size() == 5 && d.vocab_size() == 256 && d.token_bytes() == 2 && !d.has_mask());
  CHECK(d.token(0) == 'h' && d.token(2) == 0xC3 && d.token(4) == '\n');

  std::string jl = tmp_path("in.jsonl");
  write_raw(jl, "{\"prompt\": \"ab\", \"completion\": \"c\"}\r\n\n{\"completion\": \"\\u00e9\", \"prompt\": \"\", \"id\": 3}\n");
  CHECK(run_cli("tokenize --jsonl " + jl + " --out " + out) == 0);
  TokenData j(out);
  std::vector<uint32_t> want = {'a', 'b', 'c', '\n', 0xC3, 0xA9, '\n'};
  std::vector<uint8_t> want_mask = {0, 0, 1, 1, 1, 1, 1};
  CHECK(j.size() == want.size() && j.has_mask());
  bool ok = j.size() == want.size();
  for (uint64_t i = 0; ok && i < j.size(); ++i) ok = j.token(i) == want[i] && j.mask(i) == want_mask[i];
  CHECK(ok);

  write_raw(jl, "{\"prompt\": \"a\", \"completion\": \"b\"}\n{\"prompt\": 5, \"completion\": \"b\"}\n");
  CHECK(run_cli("tokenize --jsonl " + jl + " --out " + out) != 0);
  std::string log = fs::read_file(tmp_path("cli.log"), 1 << 20);
  CHECK_MSG(log.find("line 2") != std::string::npos && log.find("\"prompt\"") != std::string::npos, log);
  write_raw(jl, "{\"prompt\": \"a\"}\n");
  CHECK(run_cli("tokenize --jsonl " + jl + " --out " + out) != 0);
  log = fs::read_file(tmp_path("cli.log"), 1 << 20);
  CHECK_MSG(log.find("line 1") != std::string::npos && log.find("\"completion\"") != std::string::npos, log);
  CHECK(run_cli("tokenize --out " + out) != 0);
}

TEST(cleanup) { fs::remove_all(tmp_dir()); }

TEST_MAIN()
