// The reader of one optional config section object (model.router, model.rope_scaling, finetune.lora, ...): typed
// fields, a null field read as absent (sections written from Hugging Face configs carry nulls), and unknown keys
// refused by name. Errors name the field by its whole dotted path, which the section's name starts.
#pragma once
#include <cmath>
#include <set>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/json.h"

namespace moe {

class SectionReader {
 public:
  SectionReader(const json::Value& v, std::string name) : v_(v), name_(std::move(name)) {
    check(v.is_object(), name_ + ": must be a JSON object or null");
  }
  std::string field(const std::string& k) const { return name_ + "." + k; }
  // The field, or null when it is absent or null; either way it counts as known.
  const json::Value* get(const std::string& k) {
    used_.insert(k);
    const json::Value* x = v_.find(k);
    return x && !x->is_null() ? x : nullptr;
  }
  double number(const std::string& k, double def) {
    const json::Value* x = get(k);
    if (!x) return def;
    if (!x->is_number()) fail(field(k) + ": must be a number, got " + json::dump(*x));
    return x->number;
  }
  double number(const std::string& k, double def, double lo, double hi) {
    const json::Value* x = get(k);
    if (!x) return def;
    if (!x->is_number() || x->number < lo || x->number > hi)
      fail(field(k) + ": must be a number in [" + json::dump(json::Value::of(lo)) + ", " +
           json::dump(json::Value::of(hi)) + "], got " + json::dump(*x));
    return x->number;
  }
  int integer(const std::string& k, int def, int lo, int hi) {
    const double d = number(k, def, lo, hi);
    if (d != std::floor(d)) fail(field(k) + ": must be a whole number");
    return static_cast<int>(d);
  }
  bool boolean(const std::string& k, bool def) {
    const json::Value* x = get(k);
    if (!x) return def;
    if (!x->is_bool()) fail(field(k) + ": must be true or false");
    return x->boolean;
  }
  std::string string(const std::string& k, const std::string& def) {
    const json::Value* x = get(k);
    if (!x) return def;
    if (!x->is_string()) fail(field(k) + ": must be a string, got " + json::dump(*x));
    return x->string;
  }
  void done() const {
    for (const auto& [k, _] : v_.object)
      if (!used_.count(k)) fail(field(k) + ": unknown field");
  }

 private:
  const json::Value& v_;
  std::string name_;
  std::set<std::string> used_;
};

}  // namespace moe
