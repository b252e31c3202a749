// The small JSON reader/writer behind safetensors headers: values, escapes, exact integers,
// and parse errors that say where and what was expected.
#include "io/json.h"

#include "ganengine/error.h"
#include "support/test_util.h"

using ge::json::Value;

namespace {

std::string parse_error(const std::string& text) {
  try {
    ge::json::parse(text);
  } catch (const ge::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("json: parses every kind of value") {
  const Value v = ge::json::parse(
      " {\"n\": null, \"t\": true, \"f\": false, \"i\": -42, \"big\": 9007199254740993, \"x\": 2.5e-3,"
      " \"s\": \"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\", \"a\": [1, [2, {}], []], \"o\": {\"k\": "
      "\"v\"}} \n");
  REQUIRE(v.is_object());
  CHECK(v.find("n")->is_null());
  CHECK(v.find("t")->as_bool() == true);
  CHECK(v.find("f")->as_bool() == false);
  CHECK(v.find("i")->as_integer() == -42);
  CHECK(v.find("big")->as_integer() == 9007199254740993LL);  // not representable in a double
  CHECK(v.find("x")->as_number() == 2.5e-3);
  CHECK(v.find("s")->as_string() == "a\"b\\c/d\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80");
  CHECK(v.find("a")->as_array().size() == 3);
  CHECK(v.find("a")->as_array()[1].as_array()[1].is_object());
  CHECK(v.find("o")->find("k")->as_string() == "v");
  CHECK(v.find("missing") == nullptr);
  // Members keep their order.
  std::vector<std::string> keys;
  for (const auto& m : v.as_object()) keys.push_back(m.key);
  CHECK(keys == std::vector<std::string>{"n", "t", "f", "i", "big", "x", "s", "a", "o"});
  // Integers beyond int64 become doubles rather than failing.
  CHECK(ge::json::parse("18446744073709551616").as_number() == 18446744073709551616.0);
  CHECK(ge::json::parse("-0").as_integer() == 0);
}

TEST_CASE("json: write is compact and parses back to the same value") {
  Value o = Value::object();
  o.set("name", Value::string("q\"\\\n\x01 \xc3\xa9"));
  o.set("list",
        Value::array({Value::integer(-3), Value::number(0.1), Value::number(2.0), Value::boolean(true), Value()}));
  o.set("empty", Value::object());
  const std::string text = ge::json::write(o);
  CHECK(text == "{\"name\":\"q\\\"\\\\\\n\\u0001 \xc3\xa9\",\"list\":[-3,0.1,2.0,true,null],\"empty\":{}}");
  const Value back = ge::json::parse(text);
  CHECK(ge::json::write(back) == text);
  CHECK(back.find("list")->as_array()[2].kind() == Value::Kind::Number);
  o.set("name", Value::string("replaced"));  // set() replaces in place
  CHECK(ge::json::write(o).rfind("{\"name\":\"replaced\"", 0) == 0);
}

TEST_CASE("json: errors give the position and what was expected") {
  CHECK(parse_error("{\"a\": 1,}") ==
        "JSON error at byte 8 (line 1, column 9): expected a string key in an object, found '}'");
  CHECK(parse_error("[1, 2") ==
        "JSON error at byte 5 (line 1, column 6): expected ',' or ']' after an array element, found the end of the "
        "input");
  CHECK(parse_error("{\n  \"a\" 1}").find("line 2, column 7): expected ':' after an object key, found '1'") !=
        std::string::npos);
  CHECK(parse_error("").find("expected a value") != std::string::npos);
  CHECK(parse_error("{} x").find("expected the end of the document") != std::string::npos);
  CHECK(parse_error("\"abc").find("expected a closing '\"'") != std::string::npos);
  CHECK(parse_error("\"a\nb\"").find("raw control characters") != std::string::npos);
  CHECK(parse_error("\"\\x\"").find("expected an escape") != std::string::npos);
  CHECK(parse_error("\"\\u12g4\"").find("4 hexadecimal digits") != std::string::npos);
  CHECK(parse_error("\"\\ud800\"").find("low surrogate") != std::string::npos);
  CHECK(parse_error("\"\\udc00\"").find("high surrogate") != std::string::npos);
  CHECK(parse_error("01").find("leading zeros") != std::string::npos);
  CHECK(parse_error("1.").find("digit after the decimal point") != std::string::npos);
  CHECK(parse_error("1e+").find("digit in the exponent") != std::string::npos);
  CHECK(parse_error("-").find("expected a digit") != std::string::npos);
  CHECK(parse_error("1e999").find("range of a double") != std::string::npos);
  CHECK(parse_error("tru").find("expected 'true'") != std::string::npos);
  CHECK(parse_error("{\"k\":1,\"k\":2}").find("\"k\" appears twice") != std::string::npos);
  CHECK(parse_error("\x01").find("found byte 0x01") != std::string::npos);
  CHECK(parse_error(std::string(300, '[') + std::string(300, ']')).find("nesting") != std::string::npos);
  CHECK(parse_error(std::string(200, '[') + std::string(200, ']')) == "(no error)");
}

TEST_CASE("json: accessors name the expected kind") {
  const Value v = ge::json::parse("[1]");
  CHECK_THROWS_WITH_AS(v.as_string(), "JSON: expected a string, got array", ge::Error);
  CHECK_THROWS_WITH_AS(v.as_array()[0].as_bool(), "JSON: expected a boolean, got integer", ge::Error);
  CHECK(v.as_array()[0].as_number() == 1.0);
}
