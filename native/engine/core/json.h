// A small strict JSON reader/writer for configs, safetensors headers and trainer state.
// Parse errors name the byte offset; object member order is preserved for stable output.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace moe::json {

enum class Type { Null, Bool, Number, String, Array, Object };

struct Value {
  Type type = Type::Null;
  bool boolean = false;
  double number = 0.0;
  std::string string;
  std::vector<Value> array;
  std::vector<std::pair<std::string, Value>> object;

  static Value null() { return {}; }
  static Value of(bool b) { Value v; v.type = Type::Bool; v.boolean = b; return v; }
  static Value of(double d) { Value v; v.type = Type::Number; v.number = d; return v; }
  static Value of(int64_t i) { return of(static_cast<double>(i)); }
  static Value of(int i) { return of(static_cast<double>(i)); }
  static Value of(std::string s) { Value v; v.type = Type::String; v.string = std::move(s); return v; }
  static Value of(const char* s) { return of(std::string(s)); }
  static Value make_array() { Value v; v.type = Type::Array; return v; }
  static Value make_object() { Value v; v.type = Type::Object; return v; }

  bool is_null() const { return type == Type::Null; }
  bool is_object() const { return type == Type::Object; }
  bool is_array() const { return type == Type::Array; }
  bool is_number() const { return type == Type::Number; }
  bool is_string() const { return type == Type::String; }
  bool is_bool() const { return type == Type::Bool; }

  // Object member lookup; nullptr when absent (or when this is not an object).
  const Value* find(std::string_view key) const;
  // Appends (or replaces) an object member and returns it.
  Value& set(const std::string& key, Value v);
  void push(Value v) { array.push_back(std::move(v)); }
};

// Throws EngineError("<what>: invalid JSON at byte <offset>: <reason>").
Value parse(std::string_view text, const std::string& what = "JSON");
// Compact when indent < 0; numbers that are integers print without a fraction.
std::string dump(const Value& v, int indent = -1);

const char* type_name(Type t);

}  // namespace moe::json
