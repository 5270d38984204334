// checksums.json in a checkpoint directory: the CRC-32 and size of every file the engine wrote there, so a
// bit flip or a truncated copy is found before a byte of it reaches the model, and a resume can fall back
// to an earlier checkpoint. Checkpoints written before checksums existed (and Hugging Face folders) have no
// such file and load unverified.
#pragma once
#include <string>
#include <vector>

namespace moe {

inline constexpr const char* kChecksumsFile = "checksums.json";

// Records `files` (names inside dir) as they are on disk now.
void write_checksums(const std::string& dir, const std::vector<std::string>& files);
// Fails, naming the file, its CRC and size against the recorded ones, when `file` does not match; does nothing
// when dir has no checksums.json. A file the manifest does not list fails too (it was not written with it).
void verify_checksum(const std::string& dir, const std::string& file);
// Every file checksums.json lists; false (checking nothing) when there is none.
bool verify_checkpoint(const std::string& dir);

}  // namespace moe
