// A small JSON value with a strict parser and a compact writer: enough for safetensors
// headers, checkpoints' side files and metrics lines, without pulling in a library.
// Objects keep their members in insertion order (the safetensors writer relies on it) and
// reject duplicate keys when parsed. Integers that fit in int64 stay exact integers.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ge {
namespace json {

class Value;
struct Member;

class Value {
 public:
  enum class Kind { Null, Bool, Integer, Number, String, Array, Object };

  Value() = default;  // null
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double d);
  static Value string(std::string s);
  static Value array(std::vector<Value> items = {});
  static Value object();

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::Null; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_integer() const { return kind_ == Kind::Integer; }
  bool is_number() const { return kind_ == Kind::Integer || kind_ == Kind::Number; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_array() const { return kind_ == Kind::Array; }
  bool is_object() const { return kind_ == Kind::Object; }

  // Accessors throw ge::Error naming the expected and the actual kind.
  bool as_bool() const;
  int64_t as_integer() const;
  double as_number() const;  // integers convert
  const std::string& as_string() const;
  const std::vector<Value>& as_array() const;
  std::vector<Value>& as_array();
  const std::vector<Member>& as_object() const;

  // Objects: the member named key, or nullptr.
  const Value* find(const std::string& key) const;
  // Objects: replaces the member named key or appends it at the end.
  void set(const std::string& key, Value v);
  // Objects: appends without looking for an existing key (the caller knows it is new), which
  // keeps building large objects linear.
  void append_member(std::string key, Value v);
  // Arrays: appends.
  void push_back(Value v);

 private:
  Kind kind_ = Kind::Null;
  bool bool_ = false;
  int64_t int_ = 0;
  double num_ = 0.0;
  std::string str_;
  std::vector<Value> items_;
  std::vector<Member> members_;
};

struct Member {
  std::string key;
  Value value;
};

const char* kind_name(Value::Kind k);  // "null", "boolean", "integer", ...

// Parses one JSON document (RFC 8259; surrounding whitespace allowed). Errors are ge::Error:
// "JSON error at byte 17 (line 1, column 18): expected ',' or '}' after an object member, found 'x'".
Value parse(const std::string& text);

// Compact text (no spaces), members in order; strings escaped so that parse() returns them.
std::string write(const Value& v);

}  // namespace json
}  // namespace ge
