// The reader of a Hugging Face config.json's fields (and of its nested objects, such as rope_scaling): a JSON null
// counts as absent, as it does for transformers' config classes, and every error names the file and the field.
#pragma once
#include <cmath>
#include <string>

#include "core/error.h"
#include "core/json.h"

namespace moe {

class HfFields {
 public:
  // model_type, when given, is named in a required field's error.
  HfFields(const json::Value& obj, const std::string& source, const char* model_type = nullptr)
      : obj_(obj), source_(source), model_type_(model_type) {}

  const json::Value* get(const std::string& key) const {
    const json::Value* v = obj_.find(key);
    return v && !v->is_null() ? v : nullptr;
  }
  bool present(const std::string& key) const { return obj_.find(key) != nullptr; }  // null included
  std::string where(const std::string& key) const { return source_ + ": field '" + key + "'"; }
  const std::string& source() const { return source_; }

  int integer(const std::string& key) const {
    const json::Value* v = get(key);
    if (!v)
      fail(where(key) + " is required" +
           (model_type_ ? std::string(" for model_type \"") + model_type_ + "\"" : std::string()) +
           "; the config.json is incomplete: re-save it with transformers' save_pretrained");
    return to_int(key, *v);
  }
  int integer(const std::string& key, int def) const {
    const json::Value* v = get(key);
    return v ? to_int(key, *v) : def;
  }
  double number(const std::string& key, double def) const {
    const json::Value* v = get(key);
    if (!v) return def;
    if (!v->is_number()) fail(where(key) + " must be a number, got " + json::dump(*v));
    return v->number;
  }
  bool boolean(const std::string& key, bool def) const {
    const json::Value* v = get(key);
    if (!v) return def;
    if (!v->is_bool()) fail(where(key) + " must be true or false, got " + json::dump(*v));
    return v->boolean;
  }
  std::string string(const std::string& key, const std::string& def) const {
    const json::Value* v = get(key);
    if (!v) return def;
    if (!v->is_string()) fail(where(key) + " must be a string, got " + json::dump(*v));
    return v->string;
  }

 private:
  int to_int(const std::string& key, const json::Value& v) const {
    if (!v.is_number() || v.number != std::floor(v.number) || v.number < 0 || v.number > (1 << 30))
      fail(where(key) + " must be a non-negative whole number, got " + json::dump(v));
    return static_cast<int>(v.number);
  }

  const json::Value& obj_;
  const std::string& source_;
  const char* model_type_;
};

}  // namespace moe
