// `moe-engine-dev tokenize`: byte-level token shards (vocab 256, uint16) from plain text, or from JSONL
// prompt/completion pairs with a loss mask that trains on completions only.
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "args.h"
#include "commands.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/json.h"
#include "train/token_data.h"

namespace {

const std::string& string_field(const moe::json::Value& record, const char* field, const std::string& where) {
  const moe::json::Value* v = record.find(field);
  if (!v) moe::fail(where + ": field \"" + std::string(field) + "\" is missing; each line needs \"prompt\" and \"completion\"");
  if (!v->is_string())
    moe::fail(where + ": field \"" + std::string(field) + "\" is " + moe::json::type_name(v->type) +
              ", expected a string");
  return v->string;
}

// Each record becomes prompt bytes (mask 0), then completion bytes and a '\n' (mask 1).
void tokenize_jsonl(std::string_view text, const std::string& path, std::vector<uint32_t>& tokens,
                    std::vector<uint8_t>& mask) {
  uint64_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    size_t end = nl == std::string_view::npos ? text.size() : nl;
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;  // blank lines separate nothing
    std::string where = path + " line " + std::to_string(line_no);
    moe::json::Value record = moe::json::parse(line, where);
    if (!record.is_object())
      moe::fail(where + ": line is " + std::string(moe::json::type_name(record.type)) +
                ", expected an object {\"prompt\": ..., \"completion\": ...}");
    const std::string& prompt = string_field(record, "prompt", where);
    const std::string& completion = string_field(record, "completion", where);
    for (unsigned char c : prompt) {
      tokens.push_back(c);
      mask.push_back(0);
    }
    for (unsigned char c : completion) {
      tokens.push_back(c);
      mask.push_back(1);
    }
    tokens.push_back('\n');
    mask.push_back(1);
  }
}

}  // namespace

int cmd_tokenize(int argc, char** argv) {
  cli::Args args(argc, argv, {"--bytes", "--jsonl", "--out"}, {});
  if (args.has("--bytes") == args.has("--jsonl"))
    moe::fail("pass exactly one of --bytes IN.txt or --jsonl IN.jsonl, and --out TOKENS.bin");
  const std::string out = args.require("--out");
  const bool jsonl = args.has("--jsonl");
  const std::string in = jsonl ? args.get("--jsonl") : args.get("--bytes");

  moe::fs::MappedFile file(in);
  std::string_view text(reinterpret_cast<const char*>(file.data()), file.size());
  std::vector<uint32_t> tokens;
  std::vector<uint8_t> mask;
  if (jsonl) {
    tokenize_jsonl(text, in, tokens, mask);
  } else {
    tokens.assign(file.data(), file.data() + file.size());
  }
  if (tokens.empty()) moe::fail(in + ": nothing to tokenize (empty input); pass a non-empty file");
  moe::write_token_file(out, tokens, jsonl ? &mask : nullptr, 2, 256);

  uint64_t targets = 0;
  for (uint8_t m : mask) targets += m;
  if (jsonl)
    std::printf("wrote %s: %zu byte tokens (vocab 256), %llu of them completion targets\n", out.c_str(), tokens.size(),
                static_cast<unsigned long long>(targets));
  else
    std::printf("wrote %s: %zu byte tokens (vocab 256)\n", out.c_str(), tokens.size());
  return 0;
}
