#include "backend/validation.h"

#include <cstdlib>
#include <ctime>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/json.h"
#include "include/moe_engine.h"

namespace moe {
namespace {

constexpr int kFieldCount = 5;
constexpr const char* kFields[kFieldCount] = {"backend", "device", "versions", "date", "engine_build"};

std::string* field(BackendValidation& v, int i) {
  std::string* f[kFieldCount] = {&v.backend, &v.device, &v.versions, &v.date, &v.engine_build};
  return f[i];
}

}  // namespace

std::string validation_file() {
  const char* home = std::getenv("MOE_WORKBENCH_HOME");
  if (home && *home) return fs::join(home, "validated-backends.json");
  const char* user = std::getenv("HOME");
  return fs::join(fs::join(user && *user ? user : ".", ".moe-workbench"), "validated-backends.json");
}

std::vector<BackendValidation> read_validations(const std::string& path) {
  std::vector<BackendValidation> out;
  if (!fs::exists(path)) return out;
  const json::Value root = json::parse(fs::read_file(path, 1 << 20), path);
  const json::Value* list = root.find("validated");
  check(list && list->is_array(), path + ": expected {\"validated\": [...]}");
  for (const json::Value& item : list->array) {
    BackendValidation v;
    for (int i = 0; i < kFieldCount; ++i) {
      const json::Value* f = item.find(kFields[i]);
      check(f && f->is_string(), path + ": a record lacks the string field \"" + kFields[i] + "\"");
      *field(v, i) = f->string;
    }
    out.push_back(std::move(v));
  }
  return out;
}

void record_validation(const std::string& path, const BackendValidation& v) {
  std::vector<BackendValidation> all = read_validations(path);
  std::erase_if(all, [&](const BackendValidation& r) { return r.backend == v.backend && r.device == v.device; });
  all.push_back(v);
  json::Value list = json::Value::make_array();
  for (BackendValidation& r : all) {
    json::Value o = json::Value::make_object();
    for (int i = 0; i < kFieldCount; ++i) o.set(kFields[i], json::Value::of(*field(r, i)));
    list.push(std::move(o));
  }
  json::Value root = json::Value::make_object();
  root.set("validated", std::move(list));
  const std::string::size_type slash = path.find_last_of('/');
  if (slash != std::string::npos && slash > 0) fs::mkdirs(path.substr(0, slash));
  fs::write_file_atomic(path, json::dump(root, 2) + "\n");
}

const BackendValidation* find_validation(const std::vector<BackendValidation>& records, const std::string& backend,
                                         const std::string& device) {
  for (const BackendValidation& r : records)
    if (r.backend == backend && r.device == device) return &r;
  return nullptr;
}

std::string validation_refusal(const std::string& backend, const std::string& device, bool allow_unvalidated,
                               const std::vector<BackendValidation>& records) {
  if (backend == "cpu" || allow_unvalidated || find_validation(records, backend, device)) return "";
  return "train.backend: \"" + backend + "\" has not passed its self-test on " +
         (device.empty() ? std::string("this machine") : device) + "; run `moe-engine-dev selftest --backend " +
         backend + "` here first (it records a pass in " + validation_file() +
         "), or set train.allow_unvalidated_backend to true";
}

std::string validation_status(const std::string& backend, const std::string& device,
                              const std::vector<BackendValidation>& records) {
  if (backend == "cpu") return "";
  const BackendValidation* r = find_validation(records, backend, device);
  const std::string on = device.empty() ? "this machine" : device;
  return r ? "validated on " + on + " (" + r->date + ")" : "not validated on " + on;
}

std::string validation_status_here(const std::string& backend, const std::string& device) {
  try {
    return validation_status(backend, device, read_validations(validation_file()));
  } catch (const EngineError& e) {
    return std::string("validation records unreadable: ") + e.what();
  }
}

BackendValidation validation_now(const std::string& backend, const std::string& device, const std::string& versions) {
  const std::time_t t = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", &utc);
  return {backend, device, versions, date, engine_build()};
}

std::string engine_build() { return "api " + std::to_string(MOE_ENGINE_API_VERSION) + ", built " __DATE__; }

}  // namespace moe
