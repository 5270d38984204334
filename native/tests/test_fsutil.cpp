// core/fsutil: path helpers, bounded reads, atomic file and directory replacement, read-only mapping.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <stdexcept>

#include "core/error.h"
#include "core/fsutil.h"
#include "test_files.h"
#include "testing.h"

using namespace moe;
using moe_test::expect_error;
using moe_test::tmp_dir;
using moe_test::tmp_path;


namespace {

std::set<std::string> list_dir(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

}  // namespace

TEST(join_paths) {
  CHECK(fs::join("a", "b") == "a/b");
  CHECK(fs::join("a/", "b") == "a/b");
  CHECK(fs::join("", "b") == "b");
  CHECK(fs::join("a", "") == "a");
  CHECK(fs::join("a", "/abs") == "/abs");
  CHECK(fs::join("/", "x") == "/x");
}

TEST(mkdirs_exists_remove) {
  std::string deep = tmp_path("m/n/o");
  CHECK(!fs::exists(deep));
  fs::mkdirs(deep);
  CHECK(fs::exists(deep) && fs::is_dir(deep));
  fs::mkdirs(deep);  // idempotent
  fs::write_file_atomic(fs::join(deep, "f"), "x");
  CHECK(fs::exists(fs::join(deep, "f")) && !fs::is_dir(fs::join(deep, "f")));
  expect_error([&] { fs::mkdirs(fs::join(deep, "f/g")); }, "cannot create directory", "parent is a file");
  expect_error([&] { fs::mkdirs(fs::join(deep, "f")); }, "exists but is not a directory", "path is a file");
  fs::remove_all(tmp_path("m"));
  CHECK(!fs::exists(tmp_path("m")));
  fs::remove_all(tmp_path("never_existed"));
}

TEST(read_file_bounded) {
  std::string p = tmp_path("r.txt");
  std::string content("hello\0world", 11);
  content += std::string(1000, 'z');
  fs::write_file_atomic(p, content);
  CHECK(fs::read_file(p, 5000) == content);
  CHECK(fs::read_file(p, content.size()) == content);
  expect_error([&] { fs::read_file(p, content.size() - 1); }, "over the 1010-byte limit", "bound");
  expect_error([&] { fs::read_file(tmp_path("absent"), 10); }, "absent: cannot open", "missing");
}

TEST(write_file_atomic_replaces_and_cleans_up) {
  std::string dir = tmp_path("wf");
  fs::mkdirs(dir);
  std::string p = fs::join(dir, "out.bin");
  fs::write_file_atomic(p, "first");
  fs::write_file_atomic(p, [](fs::FileSink& s) {
    s.write("sec", 3);
    s.write(std::string_view("ond"));
    CHECK(s.bytes_written() == 6);
  });
  CHECK(fs::read_file(p, 100) == "second");
  CHECK(list_dir(dir) == std::set<std::string>{"out.bin"});

  // A failing writer leaves the old file and no temp file.
  try {
    fs::write_file_atomic(p, [](fs::FileSink& s) {
      s.write("partial", 7);
      throw std::runtime_error("writer died");
    });
    CHECK(false);
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) == "writer died");
  }
  CHECK(fs::read_file(p, 100) == "second");
  CHECK(list_dir(dir) == std::set<std::string>{"out.bin"});

  expect_error([&] { fs::write_file_atomic(tmp_path("no/such/dir/f"), "x"); }, "cannot create temp file",
               "missing directory");
  expect_error([&] { fs::write_file_atomic(dir, "x"); }, "cannot rename", "target is a directory");
  CHECK(list_dir(tmp_dir()).count("wf") == 1);
  CHECK(list_dir(dir) == std::set<std::string>{"out.bin"});
}

TEST(write_dir_atomic_creates_replaces_and_recovers) {
  std::string parent = tmp_path("runs");
  std::string ckpt = fs::join(parent, "ckpt");
  fs::write_dir_atomic(ckpt, [](const std::string& tmp) {
    fs::write_file_atomic(fs::join(tmp, "a.txt"), "v1");
    fs::mkdirs(fs::join(tmp, "sub"));
    fs::write_file_atomic(fs::join(tmp, "sub/b.txt"), "v1b");
  });
  CHECK(fs::read_file(fs::join(ckpt, "a.txt"), 10) == "v1");
  CHECK(fs::read_file(fs::join(ckpt, "sub/b.txt"), 10) == "v1b");
  CHECK(list_dir(parent) == std::set<std::string>{"ckpt"});

  // Replacing swaps the whole directory: files of the old copy do not survive.
  fs::write_dir_atomic(ckpt + "/", [](const std::string& tmp) {
    CHECK(tmp.find("/.ckpt.tmp-") != std::string::npos);
    fs::write_file_atomic(fs::join(tmp, "c.txt"), "v2");
  });
  CHECK(list_dir(ckpt) == std::set<std::string>{"c.txt"});
  CHECK(list_dir(parent) == std::set<std::string>{"ckpt"});

  // A failing fill leaves the old copy untouched and removes the temp directory.
  try {
    fs::write_dir_atomic(ckpt, [](const std::string& tmp) {
      fs::write_file_atomic(fs::join(tmp, "d.txt"), "partial");
      fail("fill failed");
    });
    CHECK(false);
  } catch (const EngineError& e) {
    CHECK(std::string(e.what()) == "fill failed");
  }
  CHECK(list_dir(ckpt) == std::set<std::string>{"c.txt"});
  CHECK(list_dir(parent) == std::set<std::string>{"ckpt"});

  // A stale temp directory from a crashed writer with this pid is cleared first.
  std::string stale = fs::join(parent, ".ckpt.tmp-" + std::to_string(::getpid()));
  fs::mkdirs(stale);
  fs::write_file_atomic(fs::join(stale, "junk"), "x");
  fs::write_dir_atomic(ckpt, [](const std::string& tmp) { fs::write_file_atomic(fs::join(tmp, "e.txt"), "v3"); });
  CHECK(list_dir(ckpt) == std::set<std::string>{"e.txt"});
  CHECK(list_dir(parent) == std::set<std::string>{"ckpt"});

  // Parents are created as needed.
  std::string nested = tmp_path("x/y/z");
  fs::write_dir_atomic(nested, [](const std::string& tmp) { fs::write_file_atomic(fs::join(tmp, "f"), "1"); });
  CHECK(fs::read_file(fs::join(nested, "f"), 10) == "1");
  expect_error([&] { fs::write_dir_atomic("/", [](const std::string&) {}); }, "name a subdirectory", "root");
}

TEST(mapped_file) {
  std::string p = tmp_path("map.bin");
  fs::write_file_atomic(p, "abcdef");
  fs::MappedFile m(p);
  CHECK(m.size() == 6 && std::memcmp(m.data(), "abcdef", 6) == 0 && m.path() == p);

  fs::MappedFile moved(std::move(m));
  CHECK(moved.size() == 6 && moved.data()[5] == 'f');
  CHECK(m.data() == nullptr && m.size() == 0);
  fs::MappedFile assigned;
  assigned = std::move(moved);
  CHECK(assigned.size() == 6 && assigned.data()[0] == 'a' && moved.data() == nullptr);

  std::string e = tmp_path("empty.bin");
  fs::write_file_atomic(e, "");
  fs::MappedFile empty(e);
  CHECK(empty.size() == 0 && empty.data() == nullptr);

  expect_error([&] { fs::MappedFile x(tmp_path("absent.bin")); }, "cannot open", "missing");
  expect_error([&] { fs::MappedFile x(tmp_dir()); }, "not a regular file", "directory");
}

TEST(cleanup) { fs::remove_all(tmp_dir()); }

TEST_MAIN()
