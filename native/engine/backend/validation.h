// Which backends have passed their self-test on this machine. `moe-engine-dev selftest --backend NAME` records a
// pass (backend, device, its driver and runtime versions, date, engine build) in validated-backends.json under
// $MOE_WORKBENCH_HOME (default ~/.moe-workbench); the engine refuses to train on a backend other than "cpu" that
// has no record for the device it would run on, unless train.allow_unvalidated_backend says otherwise.
#pragma once
#include <string>
#include <vector>

namespace moe {

struct BackendValidation {
  std::string backend, device, versions, date, engine_build;
};

// $MOE_WORKBENCH_HOME/validated-backends.json, or ~/.moe-workbench/validated-backends.json.
std::string validation_file();

// The records in the file; none when it does not exist. Fails on a file that is not a record list.
std::vector<BackendValidation> read_validations(const std::string& path);
// Adds v, replacing an earlier record of the same backend and device; creates the file and its directory.
void record_validation(const std::string& path, const BackendValidation& v);

// The record of backend on device, or null.
const BackendValidation* find_validation(const std::vector<BackendValidation>& records, const std::string& backend,
                                         const std::string& device);

// Empty when the engine may compute on backend (running on device), else why not: "cpu" always may; any other
// backend needs a record for that device, or allow_unvalidated.
std::string validation_refusal(const std::string& backend, const std::string& device, bool allow_unvalidated,
                               const std::vector<BackendValidation>& records);

// One line for listings: "validated on <device> (<date>)", "not validated on <device>", or "" for "cpu".
std::string validation_status(const std::string& backend, const std::string& device,
                              const std::vector<BackendValidation>& records);

// validation_status against the records of validation_file(); a file that cannot be read says so instead.
std::string validation_status_here(const std::string& backend, const std::string& device);

// A record of a pass now: the backend's name, device and versions, today's date (UTC) and this build.
BackendValidation validation_now(const std::string& backend, const std::string& device, const std::string& versions);

// The engine build a record names: the C API version and the build date.
std::string engine_build();

}  // namespace moe
