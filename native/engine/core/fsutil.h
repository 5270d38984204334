// File helpers for checkpoints and data: bounded whole-file reads, crash-safe (atomic) file and
// directory writes, and a read-only memory map. Errors name the path and say what to do.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace moe::fs {

std::string join(const std::string& a, const std::string& b);
bool exists(const std::string& path);
bool is_dir(const std::string& path);
// Creates `path` and any missing parents; succeeds when it already is a directory.
void mkdirs(const std::string& path);
// Removes a file or a directory tree; absent paths are fine.
void remove_all(const std::string& path);

// Bytes an unprivileged user may still write on the file system that holds `path` (or would: its nearest existing
// ancestor); -1 where the file system does not say.
int64_t free_bytes(const std::string& path);
// Bytes the file at `path` occupies on its disk (its allocated blocks: a sparse file's holes take none); 0 if absent.
int64_t allocated_bytes(const std::string& path);
// Whether a and b (or their nearest existing ancestors) lie on one file system.
bool same_filesystem(const std::string& a, const std::string& b);
// "12.35 GB" (or "0.3 MB" below a gigabyte): sizes in the messages that set a need against what a disk has.
std::string size_text(uint64_t bytes);

// Reads a whole file, refusing files larger than max_bytes (so hostile inputs cannot exhaust memory).
std::string read_file(const std::string& path, uint64_t max_bytes);

// Sequential writer handed to write_file_atomic's fill callback; errors name the final path.
class FileSink {
 public:
  void write(const void* data, size_t n);
  void write(std::string_view s) { write(s.data(), s.size()); }
  uint64_t bytes_written() const { return written_; }

 private:
  friend void write_file_atomic(const std::string&, const std::function<void(FileSink&)>&);
  FileSink(int fd, const std::string& path) : fd_(fd), path_(path) {}
  int fd_;
  const std::string& path_;
  uint64_t written_ = 0;
};

// Writes `path` so that readers (and a crash) see either the old file or the complete new one:
// fill() writes a temp file in the same directory, which is fsynced, renamed over `path`, and the
// directory fsynced. The temp file is removed if fill() throws.
void write_file_atomic(const std::string& path, const std::function<void(FileSink&)>& fill);
void write_file_atomic(const std::string& path, std::string_view data);

// Replaces directory `dir` as a unit: fill(tmp) populates the sibling `.NAME.tmp-<pid>`, whose files and
// directories are then fsynced and renamed into place. An existing `dir` is first renamed to
// `.NAME.old-<pid>` and removed after the swap, so a crash leaves the old or the new copy, never neither.
void write_dir_atomic(const std::string& dir, const std::function<void(const std::string& tmp_dir)>& fill);

// Read-only private mapping of a whole file; an empty file maps to data() == nullptr, size() == 0.
// The file must not be truncated while mapped (reads of vanished pages raise SIGBUS).
class MappedFile {
 public:
  MappedFile() = default;
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Unmaps the whole pages inside [offset, offset + bytes) from this process (they stay in the page cache and are
  // read again if touched), so streaming through a file larger than memory does not count it all as resident.
  void drop(uint64_t offset, uint64_t bytes) const;

 private:
  void release();
  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace moe::fs
