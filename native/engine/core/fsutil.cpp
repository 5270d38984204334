#include "core/fsutil.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <utility>

#include "core/error.h"

namespace moe::fs {
namespace {

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

std::string strip_trailing_slashes(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

std::string parent_dir(const std::string& path) {
  std::string p = strip_trailing_slashes(path);
  size_t slash = p.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return p.substr(0, slash);
}

std::string base_name(const std::string& path) {
  std::string p = strip_trailing_slashes(path);
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

void fsync_path(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0));
  if (fd < 0) fail(path + ": cannot open to fsync: " + errno_text(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) fail(path + ": fsync failed: " + errno_text(err) + "; check free disk space and the filesystem");
}

// Makes every file and directory below (and including) root durable before it is renamed into place.
void fsync_tree(const std::string& root) {
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec); !ec && it != std::filesystem::end(it);
       it.increment(ec)) {
    auto status = it->symlink_status(ec);
    if (ec) break;
    if (std::filesystem::is_regular_file(status)) fsync_path(it->path().string(), false);
    else if (std::filesystem::is_directory(status)) fsync_path(it->path().string(), true);
  }
  if (ec) fail(root + ": cannot list directory to fsync it: " + ec.message());
  fsync_path(root, true);
}

// `.NAME<suffix>` beside NAME in dir; built with append because GCC 12 falsely warns (-Wrestrict) on "." + string.
std::string hidden_sibling(const std::string& dir, const std::string& name, const std::string& suffix) {
  std::string s = ".";
  s.append(name).append(suffix);
  return join(dir, s);
}

void remove_quietly(const std::string& path) noexcept {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

}  // namespace

std::string join(const std::string& a, const std::string& b) {
  if (a.empty() || (!b.empty() && b.front() == '/')) return b;
  if (b.empty()) return a;
  return a.back() == '/' ? a + b : a + "/" + b;
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

namespace {

// The path itself, else its nearest ancestor that exists ("." for a relative path with none).
std::string existing_ancestor(const std::string& path) {
  std::string p = path.empty() ? "." : path;
  while (!exists(p)) {
    const std::string up = parent_dir(p);
    if (up == p) break;
    p = up;
  }
  return p;
}

}  // namespace

int64_t free_bytes(const std::string& path) {
  struct statvfs vfs;
  if (::statvfs(existing_ancestor(path).c_str(), &vfs) != 0) return -1;
  return static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize);
}

int64_t allocated_bytes(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_blocks) * 512 : 0;
}

bool same_filesystem(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  return ::stat(existing_ancestor(a).c_str(), &sa) == 0 && ::stat(existing_ancestor(b).c_str(), &sb) == 0 &&
         sa.st_dev == sb.st_dev;
}

std::string size_text(uint64_t bytes) {
  char buf[32];
  const double b = static_cast<double>(bytes);
  if (b >= 1e9) std::snprintf(buf, sizeof buf, "%.2f GB", b / 1e9);
  else std::snprintf(buf, sizeof buf, "%.1f MB", b / 1e6);
  return buf;
}

bool is_dir(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

void mkdirs(const std::string& path) {
  if (exists(path) && !is_dir(path)) fail(path + ": exists but is not a directory; remove it or choose another path");
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) fail(path + ": cannot create directory: " + ec.message() + "; check permissions and that no parent is a file");
}

void remove_all(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) fail(path + ": cannot remove: " + ec.message() + "; check permissions");
}

std::string read_file(const std::string& path, uint64_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path + ": cannot open: " + errno_text(errno) + "; check the path");
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    fail(path + ": file is " + std::to_string(st.st_size) + " bytes, over the " + std::to_string(max_bytes) +
         "-byte limit for this kind of file; check that this is the right file");
  }
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      fail(path + ": read failed: " + errno_text(err));
    }
    if (n == 0) break;
    if (out.size() + static_cast<uint64_t>(n) > max_bytes) {
      ::close(fd);
      fail(path + ": file is over the " + std::to_string(max_bytes) +
           "-byte limit for this kind of file; check that this is the right file");
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

void FileSink::write(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) fail(path_ + ": write failed after " + std::to_string(written_) + " bytes: " + errno_text(errno) +
                    "; check free disk space");
    p += w;
    n -= static_cast<size_t>(w);
    written_ += static_cast<uint64_t>(w);
  }
}

void write_file_atomic(const std::string& path, const std::function<void(FileSink&)>& fill) {
  static std::atomic<uint64_t> counter{0};  // distinct temp names for concurrent writers in one process
  std::string dir = parent_dir(path);
  std::string tmp = hidden_sibling(dir, base_name(path),
                                   ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1)));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    fail(path + ": cannot create temp file " + tmp + ": " + errno_text(errno) +
         "; check that the directory exists and is writable");
  try {
    FileSink sink(fd, path);
    fill(sink);
    if (::fsync(fd) != 0) fail(path + ": fsync failed: " + errno_text(errno) + "; check free disk space");
    int rc = ::close(fd);
    fd = -1;
    if (rc != 0) fail(path + ": close failed: " + errno_text(errno) + "; check free disk space");
    if (::rename(tmp.c_str(), path.c_str()) != 0)
      fail(path + ": cannot rename " + tmp + " into place: " + errno_text(errno) +
           "; check that the path is not a directory and is writable");
  } catch (...) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  fsync_path(dir, true);
}

void write_file_atomic(const std::string& path, std::string_view data) {
  write_file_atomic(path, [&](FileSink& sink) { sink.write(data); });
}

void write_dir_atomic(const std::string& dir, const std::function<void(const std::string& tmp_dir)>& fill) {
  std::string target = strip_trailing_slashes(dir);
  std::string parent = parent_dir(target);
  std::string name = base_name(target);
  if (name.empty() || name == "." || name == ".." || target == "/")
    fail(dir + ": cannot replace this directory atomically; name a subdirectory");
  std::string pid = std::to_string(::getpid());
  std::string tmp = hidden_sibling(parent, name, ".tmp-" + pid);
  std::string old = hidden_sibling(parent, name, ".old-" + pid);

  mkdirs(parent);
  remove_all(tmp);  // a leftover of an earlier crashed writer that had the same pid
  if (::mkdir(tmp.c_str(), 0755) != 0) fail(tmp + ": cannot create directory: " + errno_text(errno));
  try {
    fill(tmp);
    fsync_tree(tmp);
  } catch (...) {
    remove_quietly(tmp);
    throw;
  }

  bool had_old = exists(target);
  if (had_old) {
    remove_all(old);
    if (::rename(target.c_str(), old.c_str()) != 0) {
      int err = errno;
      remove_quietly(tmp);
      fail(target + ": cannot move the existing directory aside to " + old + ": " + errno_text(err) +
           "; check permissions");
    }
  }
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    int err = errno;
    if (had_old) ::rename(old.c_str(), target.c_str());
    fail(target + ": cannot rename " + tmp + " into place: " + errno_text(err) + "; the new copy is kept at " + tmp);
  }
  fsync_path(parent, true);
  if (had_old) remove_all(old);
}

MappedFile::MappedFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path + ": cannot open: " + errno_text(errno) + "; check the path");
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    fail(path + ": cannot stat: " + errno_text(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path + ": not a regular file; pass the path of a file");
  }
  size_ = static_cast<uint64_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      fail(path + ": cannot memory-map " + std::to_string(size_) + " bytes: " + errno_text(err));
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping stays valid without the descriptor
}

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedFile::drop(uint64_t offset, uint64_t bytes) const {
  if (!data_ || offset >= size_) return;
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t begin = (offset + page - 1) / page * page, end = std::min(offset + bytes, size_) / page * page;
  if (end > begin) ::madvise(const_cast<uint8_t*>(data_) + begin, end - begin, MADV_DONTNEED);
}

void MappedFile::release() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace moe::fs
