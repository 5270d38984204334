// moe-engine inspect: a Hugging Face model folder as the import sees it (moe_hf_inspect), from the headers only.
#include <cstdio>
#include <string>

#include "commands.h"
#include "moe_engine.h"

int cmd_inspect(int argc, char** argv) {
  if (argc != 2 || argv[1][0] == '-') {
    std::fprintf(stderr, "usage: moe-engine inspect DIR\n");
    return 2;
  }
  std::string out(1 << 16, '\0');
  int64_t n = moe_hf_inspect(argv[1], out.data(), out.size());
  if (n >= static_cast<int64_t>(out.size())) {
    out.assign(static_cast<size_t>(n) + 1, '\0');
    n = moe_hf_inspect(argv[1], out.data(), out.size());
  }
  if (n < 0) {
    std::fprintf(stderr, "inspect: %s\n", out.c_str());
    return 1;
  }
  out.resize(static_cast<size_t>(n));
  std::printf("%s\n", out.c_str());
  return 0;
}
