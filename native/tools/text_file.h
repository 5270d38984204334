// Whole-file reads for the CLI commands (configs), failing with the path.
#pragma once
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace cli {

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot read");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace cli
