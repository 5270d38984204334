// Tiny --flag value parser for the CLI subcommands: unknown flags are errors that list the known ones.
#pragma once
#include <map>
#include <set>
#include <stdexcept>
#include <string>

namespace cli {

class Args {
 public:
  Args(int argc, char** argv, const std::set<std::string>& valued, const std::set<std::string>& switches) {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (switches.count(a)) {
        values_[a] = "1";
      } else if (valued.count(a)) {
        if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
        values_[a] = argv[++i];
      } else {
        std::string known;
        for (const auto& k : valued) known += " " + k + " V";
        for (const auto& k : switches) known += " " + k;
        throw std::runtime_error("unknown argument '" + a + "'; known:" + known);
      }
    }
  }
  bool has(const std::string& k) const { return values_.count(k) != 0; }
  std::string get(const std::string& k, const std::string& def = "") const {
    auto it = values_.find(k);
    return it == values_.end() ? def : it->second;
  }
  std::string require(const std::string& k) const {
    if (!has(k)) throw std::runtime_error(k + " is required");
    return get(k);
  }

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace cli
