// core/json: strict parsing with byte-offset errors, and stable output.
#include <cmath>
#include <string>

#include "core/error.h"
#include "core/json.h"
#include "test_files.h"
#include "testing.h"

using namespace moe;
using moe_test::expect_error;


TEST(parses_scalars_and_containers) {
  json::Value v = json::parse(R"( {"a": 1, "b": [true, false, null, -2.5e3, "x"], "c": {}, "d": []} )");
  CHECK(v.is_object() && v.object.size() == 4);
  CHECK(v.find("a")->is_number() && v.find("a")->number == 1.0);
  const json::Value& b = *v.find("b");
  CHECK(b.is_array() && b.array.size() == 5);
  CHECK(b.array[0].is_bool() && b.array[0].boolean && !b.array[1].boolean);
  CHECK(b.array[2].is_null());
  CHECK(b.array[3].number == -2500.0);
  CHECK(b.array[4].string == "x");
  CHECK(v.find("c")->is_object() && v.find("c")->object.empty());
  CHECK(v.find("d")->is_array() && v.find("d")->array.empty());
  CHECK(v.find("zzz") == nullptr);
  CHECK(json::Value::of(3).find("a") == nullptr);  // not an object
  CHECK(json::parse("0").number == 0.0 && json::parse("-0.125").number == -0.125);
  CHECK(json::parse("1E2").number == 100.0 && json::parse("1e-2").number == 0.01);
}

TEST(member_order_preserved) {
  json::Value v = json::parse(R"({"z": 1, "a": 2, "m": 3})");
  CHECK(v.object[0].first == "z" && v.object[1].first == "a" && v.object[2].first == "m");
  CHECK(json::dump(v) == R"({"z":1,"a":2,"m":3})");
}

TEST(string_escapes_and_unicode) {
  json::Value v = json::parse(R"("q\" b\\ s\/ \b\f\n\r\t \u0041\u00e9\u20ac\ud83d\ude00")");
  CHECK(v.string == "q\" b\\ s/ \b\f\n\r\t A\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  CHECK(json::parse("\"caf\xc3\xa9\"").string == "caf\xc3\xa9");  // raw UTF-8 passes through
}

TEST(errors_name_byte_offsets) {
  struct Case {
    const char* text;
    const char* expect;
  };
  const Case cases[] = {
      {"", "at byte 0: unexpected end of input"},
      {"{\"a\": 1,}", "at byte 8: expected a string key"},
      {"{\"a\" 1}", "at byte 5: expected ':'"},
      {"{\"a\": 1 \"b\": 2}", "at byte 8: expected ',' or '}'"},
      {"[1, 2", "at byte 5: expected ',' or ']'"},
      {"{\"a\": 1, \"a\": 2}", "at byte 12: duplicate key \"a\""},
      {"[1] x", "at byte 4: unexpected trailing characters"},
      {"01", "at byte 1: unexpected trailing characters"},
      {"-", "bad number"},
      {"1.", "bad fraction"},
      {"1e", "bad exponent"},
      {"1e999", "number out of range"},
      {"tru", "expected 'true'"},
      {"nul", "expected 'null'"},
      {"'a'", "unexpected character '''"},
      {"\"abc", "unterminated string"},
      {"\"a\nb\"", "control character in string"},
      {"\"\\x\"", "bad escape '\\x'"},
      {"\"\\u12\"", "truncated \\u escape"},
      {"\"\\u12zz\"", "bad hex digit"},
      {"\"\\ud83d\"", "unpaired surrogate"},
      {"\"\\ud83d\\u0041\"", "bad low surrogate"},
      {"NaN", "unexpected character 'N'"},
  };
  for (const auto& c : cases) expect_error([&] { json::parse(c.text, "cfg.json"); }, c.expect, c.text);
  expect_error([&] { json::parse("[1,]", "config.json"); }, "config.json: invalid JSON at byte 3", "names the source");
}

TEST(nesting_depth_bounded) {
  std::string ok_text(100, '[');
  ok_text += std::string(100, ']');
  CHECK(json::parse(ok_text).is_array());
  std::string deep(100000, '[');
  expect_error([&] { json::parse(deep); }, "nesting deeper than", "deep nesting");
}

TEST(dump_and_round_trip) {
  json::Value v = json::Value::make_object();
  v.set("int", json::Value::of(int64_t{9007199254740991}));
  v.set("neg", json::Value::of(-3));
  v.set("frac", json::Value::of(0.1));
  v.set("str", json::Value::of("a\"b\\c\n\x01"));
  json::Value arr = json::Value::make_array();
  arr.push(json::Value::of(true));
  arr.push(json::Value::null());
  v.set("arr", std::move(arr));
  v.set("empty", json::Value::make_object());
  std::string compact = json::dump(v);
  CHECK(compact ==
        R"({"int":9007199254740991,"neg":-3,"frac":0.10000000000000001,"str":"a\"b\\c\n\u0001","arr":[true,null],"empty":{}})");
  json::Value back = json::parse(compact);
  CHECK(json::dump(back) == compact);
  CHECK(back.find("frac")->number == 0.1);
  CHECK(back.find("str")->string == "a\"b\\c\n\x01");

  std::string pretty = json::dump(json::parse(R"({"a":[1,2],"b":{}})"), 2);
  CHECK(pretty == "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": {}\n}");
  CHECK(json::dump(json::parse(pretty)) == R"({"a":[1,2],"b":{}})");
  CHECK(json::dump(json::Value::of(1e300)) == "1.0000000000000001e+300");
}

TEST(set_replaces_in_place) {
  json::Value v = json::parse(R"({"a": 1, "b": 2})");
  v.set("a", json::Value::of("x"));
  v.set("c", json::Value::of(3));
  CHECK(json::dump(v) == R"({"a":"x","b":2,"c":3})");
  CHECK(std::string(json::type_name(json::Type::Object)) == "an object");
  CHECK(std::string(json::type_name(json::Type::Number)) == "a number");
}

TEST_MAIN()
