// A tiny JSON writer for the CLI's step log (the CLI sees only the C API, not the engine's JSON code): numbers,
// arrays and objects, printed compact exactly as the engine prints them (integers without a fraction, other
// numbers with 17 significant digits, null for NaN and infinities), members in insertion order.
#pragma once
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace cli::json {

struct Value {
  enum class Type { Number, Array, Object } type = Type::Number;
  double number = 0.0;
  std::vector<Value> array;
  std::vector<std::pair<std::string, Value>> object;

  static Value of(double d) {
    Value v;
    v.number = d;
    return v;
  }
  static Value make_array() {
    Value v;
    v.type = Type::Array;
    return v;
  }
  static Value make_object() {
    Value v;
    v.type = Type::Object;
    return v;
  }
  void set(const std::string& key, Value v) { object.emplace_back(key, std::move(v)); }
  void push(Value v) { array.push_back(std::move(v)); }
};

inline void dump_to(std::string& out, const Value& v) {
  if (v.type == Value::Type::Number) {
    // JSON has no NaN or infinity: a step without a value (a held-out loss not measured, a diverged loss) is null.
    if (!std::isfinite(v.number)) {
      out += "null";
      return;
    }
    char buf[32];
    if (std::nearbyint(v.number) == v.number && std::fabs(v.number) < 9.007199254740992e15)
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v.number));
    else
      std::snprintf(buf, sizeof buf, "%.17g", v.number);
    out += buf;
    return;
  }
  const bool is_array = v.type == Value::Type::Array;
  out += is_array ? '[' : '{';
  const size_t n = is_array ? v.array.size() : v.object.size();
  for (size_t i = 0; i < n; ++i) {
    if (i) out += ',';
    if (is_array) {
      dump_to(out, v.array[i]);
    } else {
      out += '"' + v.object[i].first + "\":";  // keys are the CLI's own names: nothing to escape
      dump_to(out, v.object[i].second);
    }
  }
  out += is_array ? ']' : '}';
}

inline std::string dump(const Value& v) {
  std::string out;
  dump_to(out, v);
  return out;
}

}  // namespace cli::json
