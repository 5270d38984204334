#include "train/token_data.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#include "core/error.h"

namespace moe {

static_assert(std::endian::native == std::endian::little, "token files are little-endian; add byte swapping");

namespace {

constexpr char kMagic[8] = {'M', 'O', 'E', 'T', 'O', 'K', '0', '1'};
constexpr uint64_t kHeaderBytes = 64;
const char* const kRegenerate = "; regenerate the file with `moe-engine-dev tokenize`";

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

TokenData::TokenData(const std::string& path) : file_(path) {
  const uint8_t* d = file_.data();
  const uint64_t size = file_.size();
  auto bad = [&](uint64_t byte, const std::string& reason) {
    fail(path + ": " + reason + " (byte " + std::to_string(byte) + ")" + kRegenerate);
  };
  if (size < kHeaderBytes)
    bad(0, "file is " + std::to_string(size) + " bytes, shorter than the 64-byte token file header");
  if (std::memcmp(d, kMagic, 8) != 0) bad(0, "missing magic \"MOETOK01\"; this is not a token file");
  token_bytes_ = load<uint32_t>(d + 8);
  if (token_bytes_ != 2 && token_bytes_ != 4)
    bad(8, "token_bytes is " + std::to_string(token_bytes_) + ", expected 2 (uint16) or 4 (uint32)");
  uint32_t flags = load<uint32_t>(d + 12);
  if (flags & ~1u) bad(12, "unknown flag bits " + std::to_string(flags & ~1u) + " set; only bit 0 (mask) is defined");
  has_mask_ = flags & 1u;
  n_tokens_ = load<uint64_t>(d + 16);
  vocab_size_ = load<uint32_t>(d + 24);
  for (uint64_t i = 28; i < kHeaderBytes; ++i)
    if (d[i] != 0) bad(i, "reserved header byte is " + std::to_string(d[i]) + ", expected 0");

  // Compare without overflow: n_tokens comes from the file and may be huge.
  const uint64_t per_token = token_bytes_ + (has_mask_ ? 1u : 0u);
  const uint64_t payload = size - kHeaderBytes;
  if (n_tokens_ > payload / per_token || n_tokens_ * per_token != payload) {
    std::string expected = n_tokens_ > (std::numeric_limits<uint64_t>::max() - kHeaderBytes) / per_token
                               ? "more than 2^64"
                               : std::to_string(kHeaderBytes + n_tokens_ * per_token);
    bad(16, "file is " + std::to_string(size) + " bytes but n_tokens " + std::to_string(n_tokens_) + " x " +
                std::to_string(token_bytes_) + " bytes" + (has_mask_ ? " + mask" : "") +
                " needs 64 + data = " + expected + " bytes; the file is truncated or has trailing data");
  }
  tokens_ = d + kHeaderBytes;
  if (has_mask_) {
    mask_ = tokens_ + n_tokens_ * token_bytes_;
    // Checked once here so next_batch can trust every mask byte.
    for (uint64_t i = 0; i < n_tokens_; ++i)
      if (mask_[i] > 1)
        bad(kHeaderBytes + n_tokens_ * token_bytes_ + i,
            "mask byte of token " + std::to_string(i) + " is " + std::to_string(mask_[i]) + ", expected 0 or 1");
  }
}

uint32_t TokenData::token(uint64_t i) const {
  if (i >= n_tokens_)
    fail(path() + ": token index " + std::to_string(i) + " is past the end (" + std::to_string(n_tokens_) +
         " tokens)");
  return token_bytes_ == 2 ? load<uint16_t>(tokens_ + 2 * i) : load<uint32_t>(tokens_ + 4 * i);
}

void TokenData::validate_max_token(int vocab) const {
  if (vocab <= 0) fail(path() + ": validate_max_token needs a positive vocab size, got " + std::to_string(vocab));
  const uint32_t limit = static_cast<uint32_t>(vocab);
  for (uint64_t i = 0; i < n_tokens_; ++i) {
    uint32_t t = token_bytes_ == 2 ? load<uint16_t>(tokens_ + 2 * i) : load<uint32_t>(tokens_ + 4 * i);
    if (t >= limit)
      fail(path() + ": token " + std::to_string(t) + " at index " + std::to_string(i) + " (byte " +
           std::to_string(kHeaderBytes + i * token_bytes_) + ") is >= the model's vocab_size " +
           std::to_string(vocab) + "; raise model.vocab_size or retokenize the data with a matching vocabulary");
  }
}

uint64_t TokenData::next_batch(uint64_t cursor, int B, int T, int32_t* inputs, int32_t* targets) const {
  if (B <= 0 || T <= 0)
    fail(path() + ": batch_size and seq_len must be positive, got " + std::to_string(B) + " and " + std::to_string(T));
  const uint64_t span = static_cast<uint64_t>(B) * static_cast<uint64_t>(T);
  if (n_tokens_ < span + 1)
    fail(path() + ": " + std::to_string(n_tokens_) + " tokens, fewer than batch_size x seq_len + 1 = " +
         std::to_string(span + 1) + "; use more data or a smaller batch_size or seq_len");
  if (cursor > n_tokens_ || n_tokens_ - cursor < span + 1) cursor = 0;
  for (uint64_t j = 0; j < span; ++j) {
    // Sequences are consecutive, so input j is token cursor + j and its target is the next token.
    uint32_t in = token(cursor + j);
    uint32_t next = token(cursor + j + 1);
    if (next > static_cast<uint32_t>(std::numeric_limits<int32_t>::max()) ||
        in > static_cast<uint32_t>(std::numeric_limits<int32_t>::max()))
      fail(path() + ": token id above 2^31 - 1 near index " + std::to_string(cursor + j) +
           "; run validate_max_token against the model's vocab_size");
    inputs[j] = static_cast<int32_t>(in);
    targets[j] = mask(cursor + j + 1) ? static_cast<int32_t>(next) : -1;
  }
  return cursor + span;
}

void write_token_file(const std::string& path, const std::vector<uint32_t>& tokens, const std::vector<uint8_t>* mask,
                      uint32_t token_bytes, uint32_t vocab_size) {
  if (token_bytes != 2 && token_bytes != 4)
    fail(path + ": token_bytes must be 2 or 4, got " + std::to_string(token_bytes));
  if (mask && mask->size() != tokens.size())
    fail(path + ": mask has " + std::to_string(mask->size()) + " entries for " + std::to_string(tokens.size()) +
         " tokens; give one mask byte per token");
  const uint64_t max_id = token_bytes == 2 ? 0xFFFFu : 0xFFFFFFFFu;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] > max_id)
      fail(path + ": token " + std::to_string(tokens[i]) + " at index " + std::to_string(i) +
           " does not fit in uint16; write with token_bytes 4");
    if (vocab_size && tokens[i] >= vocab_size)
      fail(path + ": token " + std::to_string(tokens[i]) + " at index " + std::to_string(i) +
           " is >= vocab_size " + std::to_string(vocab_size) + "; check the tokenizer or pass a larger vocab_size");
    if (mask && (*mask)[i] > 1)
      fail(path + ": mask entry " + std::to_string(i) + " is " + std::to_string((*mask)[i]) + ", expected 0 or 1");
  }

  uint8_t header[kHeaderBytes] = {};
  std::memcpy(header, kMagic, 8);
  uint32_t flags = mask ? 1u : 0u;
  uint64_t n = tokens.size();
  std::memcpy(header + 8, &token_bytes, 4);
  std::memcpy(header + 12, &flags, 4);
  std::memcpy(header + 16, &n, 8);
  std::memcpy(header + 24, &vocab_size, 4);
  fs::write_file_atomic(path, [&](fs::FileSink& sink) {
    sink.write(header, sizeof header);
    if (token_bytes == 4) {
      sink.write(tokens.data(), tokens.size() * 4);
    } else {
      // Narrow in chunks so the whole file never exists twice in memory.
      std::vector<uint16_t> chunk;
      for (size_t i = 0; i < tokens.size(); i += 1 << 16) {
        size_t end = std::min(tokens.size(), i + (1 << 16));
        chunk.assign(tokens.begin() + i, tokens.begin() + end);
        sink.write(chunk.data(), chunk.size() * 2);
      }
    }
    if (mask) sink.write(mask->data(), mask->size());
  });
}

}  // namespace moe
