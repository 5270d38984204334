// Token shard files (`.bin`), memory-mapped, and the training batch cut from them (docs/model.md "Training").
//
// Layout (little-endian):
//   0: magic "MOETOK01"   8: u32 token_bytes (2 or 4)   12: u32 flags (bit 0: loss mask follows the tokens)
//   16: u64 n_tokens      24: u32 vocab_size (0 = unknown)   28..63: zero
//   64: n_tokens tokens of token_bytes each, then (flags bit 0) n_tokens mask bytes (1 = prediction target, 0 = masked)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/fsutil.h"

namespace moe {

class TokenData {
 public:
  // Maps and validates the header, the exact file size and (when present) that mask bytes are 0 or 1.
  explicit TokenData(const std::string& path);

  const std::string& path() const { return file_.path(); }
  uint64_t size() const { return n_tokens_; }
  uint32_t token_bytes() const { return token_bytes_; }
  uint32_t vocab_size() const { return vocab_size_; }  // from the header; 0 = unknown
  bool has_mask() const { return has_mask_; }

  uint32_t token(uint64_t i) const;
  // 1 when token i is a prediction target; always 1 without a mask section.
  uint8_t mask(uint64_t i) const { return has_mask_ ? mask_[i] : 1; }

  // Fails naming the first token >= vocab, with its index and file offset.
  void validate_max_token(int vocab) const;

  // Fills inputs and targets ([B, T] each) from the window starting at `cursor`; a target whose token is
  // masked is -1. Restarts at 0 when fewer than B·T + 1 tokens remain; returns the next cursor.
  uint64_t next_batch(uint64_t cursor, int B, int T, int32_t* inputs, int32_t* targets) const;

 private:
  fs::MappedFile file_;
  const uint8_t* tokens_ = nullptr;
  const uint8_t* mask_ = nullptr;
  uint64_t n_tokens_ = 0;
  uint32_t token_bytes_ = 0;
  uint32_t vocab_size_ = 0;
  bool has_mask_ = false;
};

// Writes a token shard atomically. token_bytes is 2 or 4; mask (optional) has one 0/1 byte per token;
// vocab_size 0 means unknown, otherwise every token must be below it.
void write_token_file(const std::string& path, const std::vector<uint32_t>& tokens, const std::vector<uint8_t>* mask,
                      uint32_t token_bytes, uint32_t vocab_size);

}  // namespace moe
