#include "core/json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"

namespace moe::json {
namespace {

constexpr int kMaxDepth = 128;  // bounds recursion on hostile input

class Parser {
 public:
  Parser(std::string_view text, const std::string& what) : s_(text), what_(what) {}

  Value parse_document() {
    skip_ws();
    Value v = parse_value(0);
    skip_ws();
    if (pos_ != s_.size()) error("unexpected trailing characters");
    return v;
  }

 private:
  [[noreturn]] void error(const std::string& reason) {
    fail(what_ + ": invalid JSON at byte " + std::to_string(pos_) + ": " + reason);
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool consume(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect_word(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) error("expected '" + std::string(w) + "'");
    pos_ += w.size();
  }

  Value parse_value(int depth) {
    if (depth > kMaxDepth) error("nesting deeper than " + std::to_string(kMaxDepth));
    if (pos_ >= s_.size()) error("unexpected end of input");
    char c = s_[pos_];
    if (c == '{') return parse_object(depth);
    if (c == '[') return parse_array(depth);
    if (c == '"') return Value::of(parse_string());
    if (c == 't') { expect_word("true"); return Value::of(true); }
    if (c == 'f') { expect_word("false"); return Value::of(false); }
    if (c == 'n') { expect_word("null"); return Value::null(); }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number();
    error(std::string("unexpected character '") + c + "'");
  }

  Value parse_object(int depth) {
    ++pos_;
    Value obj = Value::make_object();
    skip_ws();
    if (consume('}')) return obj;
    for (;;) {
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != '"') error("expected a string key");
      std::string key = parse_string();
      if (obj.find(key)) error("duplicate key \"" + key + "\"");
      skip_ws();
      if (!consume(':')) error("expected ':'");
      skip_ws();
      obj.object.emplace_back(std::move(key), parse_value(depth + 1));
      skip_ws();
      if (consume('}')) return obj;
      if (!consume(',')) error("expected ',' or '}'");
    }
  }

  Value parse_array(int depth) {
    ++pos_;
    Value arr = Value::make_array();
    skip_ws();
    if (consume(']')) return arr;
    for (;;) {
      skip_ws();
      arr.array.push_back(parse_value(depth + 1));
      skip_ws();
      if (consume(']')) return arr;
      if (!consume(',')) error("expected ',' or ']'");
    }
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  uint32_t parse_hex4() {
    if (pos_ + 4 > s_.size()) error("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= c - '0';
      else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
      else error("bad hex digit in \\u escape");
    }
    return v;
  }

  std::string parse_string() {
    ++pos_;
    std::string out;
    for (;;) {
      if (pos_ >= s_.size()) error("unterminated string");
      char c = s_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) error("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) error("unterminated escape");
      char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = parse_hex4();
          if (cp >= 0xD800 && cp < 0xDC00) {
            if (!(consume('\\') && consume('u'))) error("unpaired surrogate");
            uint32_t lo = parse_hex4();
            if (lo < 0xDC00 || lo >= 0xE000) error("bad low surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          append_utf8(out, cp);
          break;
        }
        default: error(std::string("bad escape '\\") + e + "'");
      }
    }
  }

  Value parse_number() {
    size_t start = pos_;
    consume('-');
    if (pos_ >= s_.size() || !(s_[pos_] >= '0' && s_[pos_] <= '9')) error("bad number");
    if (s_[pos_] == '0') ++pos_;
    else while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    if (consume('.')) {
      if (pos_ >= s_.size() || !(s_[pos_] >= '0' && s_[pos_] <= '9')) error("bad fraction");
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (!consume('+')) consume('-');
      if (pos_ >= s_.size() || !(s_[pos_] >= '0' && s_[pos_] <= '9')) error("bad exponent");
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    }
    std::string text(s_.substr(start, pos_ - start));
    double d = std::strtod(text.c_str(), nullptr);
    if (!std::isfinite(d)) error("number out of range");
    return Value::of(d);
  }

  std::string_view s_;
  const std::string& what_;
  size_t pos_ = 0;
};

void dump_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void dump_number(std::string& out, double d) {
  char buf[32];
  if (std::nearbyint(d) == d && std::fabs(d) < 9.007199254740992e15) {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(d));
  } else {
    std::snprintf(buf, sizeof buf, "%.17g", d);
  }
  out += buf;
}

void dump_value(std::string& out, const Value& v, int indent, int level) {
  auto newline = [&](int lvl) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent * lvl), ' ');
  };
  switch (v.type) {
    case Type::Null: out += "null"; break;
    case Type::Bool: out += v.boolean ? "true" : "false"; break;
    case Type::Number: dump_number(out, v.number); break;
    case Type::String: dump_string(out, v.string); break;
    case Type::Array:
      out += '[';
      for (size_t i = 0; i < v.array.size(); ++i) {
        if (i) out += ',';
        newline(level + 1);
        dump_value(out, v.array[i], indent, level + 1);
      }
      if (!v.array.empty()) newline(level);
      out += ']';
      break;
    case Type::Object:
      out += '{';
      for (size_t i = 0; i < v.object.size(); ++i) {
        if (i) out += ',';
        newline(level + 1);
        dump_string(out, v.object[i].first);
        out += indent < 0 ? ":" : ": ";
        dump_value(out, v.object[i].second, indent, level + 1);
      }
      if (!v.object.empty()) newline(level);
      out += '}';
      break;
  }
}

}  // namespace

const Value* Value::find(std::string_view key) const {
  if (type != Type::Object) return nullptr;
  for (const auto& [k, v] : object)
    if (k == key) return &v;
  return nullptr;
}

Value& Value::set(const std::string& key, Value v) {
  type = Type::Object;
  for (auto& [k, existing] : object)
    if (k == key) return existing = std::move(v);
  object.emplace_back(key, std::move(v));
  return object.back().second;
}

Value parse(std::string_view text, const std::string& what) { return Parser(text, what).parse_document(); }

std::string dump(const Value& v, int indent) {
  std::string out;
  dump_value(out, v, indent, 0);
  return out;
}

const char* type_name(Type t) {
  switch (t) {
    case Type::Null: return "null";
    case Type::Bool: return "a boolean";
    case Type::Number: return "a number";
    case Type::String: return "a string";
    case Type::Array: return "an array";
    case Type::Object: return "an object";
  }
  return "?";
}

}  // namespace moe::json
