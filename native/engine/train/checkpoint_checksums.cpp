#include "train/checkpoint_checksums.h"

#include <cstdio>

#include "core/crc32.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/json.h"

namespace moe {
namespace {

constexpr const char* kFormat = "moe-engine-checksums";
constexpr uint64_t kMaxManifestBytes = 1 << 20;

std::string hex(uint32_t v) {
  char s[9];
  std::snprintf(s, sizeof s, "%08x", v);
  return s;
}

struct Recorded {
  std::string crc;
  double bytes = 0;
};

// The manifest's entry for file; fails naming checksums.json when it is malformed.
json::Value read_manifest(const std::string& dir) {
  const std::string path = fs::join(dir, kChecksumsFile);
  json::Value root = json::parse(fs::read_file(path, kMaxManifestBytes), path);
  const json::Value* format = root.is_object() ? root.find("format") : nullptr;
  const json::Value* files = root.is_object() ? root.find("files") : nullptr;
  if (!format || !format->is_string() || format->string != kFormat || !files || !files->is_object())
    fail(path + ": not a checksum manifest (needs \"format\": \"" + kFormat + "\" and a \"files\" object); "
                "the checkpoint is corrupt");
  return root;
}

Recorded recorded(const json::Value& root, const std::string& dir, const std::string& file) {
  const std::string path = fs::join(dir, kChecksumsFile);
  const json::Value* entry = root.find("files")->find(file);
  if (!entry) fail(fs::join(dir, file) + ": not listed in " + path + "; the checkpoint was altered after it was written");
  const json::Value* crc = entry->is_object() ? entry->find("crc32") : nullptr;
  const json::Value* bytes = entry->is_object() ? entry->find("bytes") : nullptr;
  if (!crc || !crc->is_string() || !bytes || !bytes->is_number())
    fail(path + ": files." + file + " needs \"crc32\" (8 hex digits) and \"bytes\"; the checkpoint is corrupt");
  return {crc->string, bytes->number};
}

void check_one(const json::Value& root, const std::string& dir, const std::string& file) {
  const Recorded want = recorded(root, dir, file);
  const std::string path = fs::join(dir, file);
  if (!fs::exists(path)) fail(path + ": missing, though " + std::string(kChecksumsFile) + " lists it");
  uint64_t bytes = 0;
  const std::string got = hex(crc32_file(path, &bytes));
  if (got != want.crc || static_cast<double>(bytes) != want.bytes)
    fail(path + ": checksum mismatch: crc32 " + got + " over " + std::to_string(bytes) + " bytes, but " +
         kChecksumsFile + " recorded " + want.crc + " over " + json::dump(json::Value::of(want.bytes)) +
         " bytes; the file is corrupt (a flipped bit or an incomplete copy): use an earlier checkpoint");
}

}  // namespace

void write_checksums(const std::string& dir, const std::vector<std::string>& files) {
  json::Value list = json::Value::make_object();
  for (const std::string& file : files) {
    uint64_t bytes = 0;
    const uint32_t crc = crc32_file(fs::join(dir, file), &bytes);
    json::Value entry = json::Value::make_object();
    entry.set("bytes", json::Value::of(static_cast<double>(bytes)));
    entry.set("crc32", json::Value::of(hex(crc)));
    list.set(file, entry);
  }
  json::Value root = json::Value::make_object();
  root.set("format", json::Value::of(kFormat));
  root.set("version", json::Value::of(1));
  root.set("algorithm", json::Value::of("crc32 (zlib)"));
  root.set("files", list);
  fs::write_file_atomic(fs::join(dir, kChecksumsFile), json::dump(root, 2) + "\n");
}

void verify_checksum(const std::string& dir, const std::string& file) {
  if (!fs::exists(fs::join(dir, kChecksumsFile))) return;
  check_one(read_manifest(dir), dir, file);
}

bool verify_checkpoint(const std::string& dir) {
  if (!fs::exists(fs::join(dir, kChecksumsFile))) return false;
  const json::Value root = read_manifest(dir);
  for (const auto& [file, entry] : root.find("files")->object) check_one(root, dir, file);
  return true;
}

}  // namespace moe
