// File helpers shared by the native tests: a per-process temp directory, raw file writes for
// corrupted-input cases, and a check that a call fails with an error naming what it should.
#pragma once
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/fsutil.h"
#include "train/token_data.h"
#include "testing.h"

namespace moe_test {

// Removed when the process exits with every test passed; kept for a look when one failed, or with
// MOE_KEEP_TEST_FILES set. (Forked children leave with _exit, which runs no exit handler.)
inline const std::string& tmp_dir() {
  static std::string dir = [] {
    std::string base = std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp";
    std::string templ = base + "/" + program_invocation_short_name + "_XXXXXX";
    if (!::mkdtemp(templ.data())) moe::fail("cannot create a temp dir under " + base);
    return templ;
  }();
  // Registered once `dir` is constructed, so the handler runs before its destructor.
  static const bool removed_at_exit = std::atexit([] {
    std::error_code ec;
    if (failures() == 0 && !std::getenv("MOE_KEEP_TEST_FILES")) std::filesystem::remove_all(tmp_dir(), ec);
  }) == 0;
  (void)removed_at_exit;
  return dir;
}

inline std::string tmp_path(const std::string& name) { return moe::fs::join(tmp_dir(), name); }

// The bundled corpus's bytes as a token shard (vocab 256) in this process's temp directory, written once.
inline const std::string& corpus_tokens() {
  static const std::string path = [] {
    const char* src = std::getenv("MOE_SOURCE_DIR");
    std::ifstream in(std::string(src ? src : "..") + "/resources/corpus/python-tutorial.txt", std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.empty()) moe::fail("cannot read the bundled corpus (set MOE_SOURCE_DIR to the repository)");
    std::vector<uint32_t> tokens(text.begin(), text.end());
    for (auto& t : tokens) t &= 0xFF;
    const std::string out = tmp_path("corpus_tokens.bin");
    moe::write_token_file(out, tokens, nullptr, 2, 256);
    return out;
  }();
  return path;
}

inline void write_raw(const std::string& path, const std::string& bytes) {
  ::unlink(path.c_str());  // a fresh file: rewriting a truncated one makes some filesystems flush on close
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// f() must throw an EngineError whose message contains every needle.
template <typename F>
void expect_error(F&& f, const std::vector<std::string>& needles, const std::string& label) {
  try {
    f();
    CHECK_MSG(false, label + ": expected an error containing '" + (needles.empty() ? "" : needles[0]) + "'");
  } catch (const moe::EngineError& e) {
    for (const std::string& n : needles)
      CHECK_MSG(std::string(e.what()).find(n) != std::string::npos,
                label + ": error '" + e.what() + "' lacks '" + n + "'");
  }
}

template <typename F>
void expect_error(F&& f, std::initializer_list<std::string> needles, const std::string& label) {
  expect_error(std::forward<F>(f), std::vector<std::string>(needles), label);
}

template <typename F>
void expect_error(F&& f, const std::string& needle, const std::string& label) {
  expect_error(std::forward<F>(f), std::vector<std::string>{needle}, label);
}

}  // namespace moe_test
