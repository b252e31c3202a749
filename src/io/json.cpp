#include "io/json.h"

#include <charconv>
#include <cmath>
#include <unordered_set>
#include <utility>

#include "ganengine/error.h"

namespace ge {
namespace json {

// ---------------------------------------------------------------- values

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::Bool;
  v.bool_ = b;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::Integer;
  v.int_ = i;
  return v;
}
Value Value::number(double d) {
  Value v;
  v.kind_ = Kind::Number;
  v.num_ = d;
  return v;
}
Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::String;
  v.str_ = std::move(s);
  return v;
}
Value Value::array(std::vector<Value> items) {
  Value v;
  v.kind_ = Kind::Array;
  v.items_ = std::move(items);
  return v;
}
Value Value::object() {
  Value v;
  v.kind_ = Kind::Object;
  return v;
}

const char* kind_name(Value::Kind k) {
  switch (k) {
    case Value::Kind::Null: return "null";
    case Value::Kind::Bool: return "boolean";
    case Value::Kind::Integer: return "integer";
    case Value::Kind::Number: return "number";
    case Value::Kind::String: return "string";
    case Value::Kind::Array: return "array";
    case Value::Kind::Object: return "object";
  }
  return "?";
}

namespace {
[[noreturn]] void wrong_kind(const char* expected, Value::Kind got) {
  fail("JSON: expected ", expected, ", got ", kind_name(got));
}
}  // namespace

bool Value::as_bool() const {
  if (kind_ != Kind::Bool) wrong_kind("a boolean", kind_);
  return bool_;
}
int64_t Value::as_integer() const {
  if (kind_ != Kind::Integer) wrong_kind("an integer", kind_);
  return int_;
}
double Value::as_number() const {
  if (kind_ == Kind::Integer) return static_cast<double>(int_);
  if (kind_ != Kind::Number) wrong_kind("a number", kind_);
  return num_;
}
const std::string& Value::as_string() const {
  if (kind_ != Kind::String) wrong_kind("a string", kind_);
  return str_;
}
const std::vector<Value>& Value::as_array() const {
  if (kind_ != Kind::Array) wrong_kind("an array", kind_);
  return items_;
}
std::vector<Value>& Value::as_array() {
  if (kind_ != Kind::Array) wrong_kind("an array", kind_);
  return items_;
}
const std::vector<Member>& Value::as_object() const {
  if (kind_ != Kind::Object) wrong_kind("an object", kind_);
  return members_;
}

const Value* Value::find(const std::string& key) const {
  for (const Member& m : as_object())
    if (m.key == key) return &m.value;
  return nullptr;
}

void Value::set(const std::string& key, Value v) {
  if (kind_ != Kind::Object) wrong_kind("an object", kind_);
  for (Member& m : members_) {
    if (m.key == key) {
      m.value = std::move(v);
      return;
    }
  }
  members_.push_back(Member{key, std::move(v)});
}

void Value::append_member(std::string key, Value v) {
  if (kind_ != Kind::Object) wrong_kind("an object", kind_);
  members_.push_back(Member{std::move(key), std::move(v)});
}

void Value::push_back(Value v) { as_array().push_back(std::move(v)); }

// ---------------------------------------------------------------- parser

namespace {

// Deep enough for any real document, shallow enough that hostile input cannot overflow the stack.
constexpr int kMaxDepth = 256;

class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}

  Value document() {
    skip_space();
    Value v = value(0);
    skip_space();
    if (pos_ != s_.size()) error("expected the end of the document");
    return v;
  }

 private:
  const std::string& s_;
  size_t pos_ = 0;

  [[noreturn]] void error(const std::string& expected) const { error_at(pos_, expected); }

  [[noreturn]] void error_at(size_t at, const std::string& expected) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    std::string found;
    if (at >= s_.size()) {
      found = "the end of the input";
    } else {
      const unsigned char c = static_cast<unsigned char>(s_[at]);
      if (c >= 0x20 && c < 0x7f) {
        found = std::string("'") + static_cast<char>(c) + "'";
      } else {
        static const char* hex = "0123456789abcdef";
        found = std::string("byte 0x") + hex[c >> 4] + hex[c & 15];
      }
    }
    fail("JSON error at byte ", at, " (line ", line, ", column ", column, "): ", expected, ", found ", found);
  }

  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[pos_]; }

  void skip_space() {
    while (!at_end() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }

  void expect_literal(const char* word) {
    for (const char* p = word; *p; ++p, ++pos_)
      if (at_end() || s_[pos_] != *p) error(std::string("expected '") + word + "'");
  }

  Value value(int depth) {
    if (depth > kMaxDepth) error("expected at most 256 levels of nesting");
    switch (peek()) {
      case '{': return object(depth);
      case '[': return array(depth);
      case '"': return Value::string(string());
      case 't': expect_literal("true"); return Value::boolean(true);
      case 'f': expect_literal("false"); return Value::boolean(false);
      case 'n': expect_literal("null"); return Value();
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return number();
        error("expected a value (object, array, string, number, true, false or null)");
    }
  }

  Value object(int depth) {
    ++pos_;  // '{'
    Value obj = Value::object();
    std::unordered_set<std::string> keys;
    skip_space();
    if (peek() == '}') {
      ++pos_;
      return obj;
    }
    for (;;) {
      skip_space();
      if (peek() != '"') error("expected a string key in an object");
      const size_t key_at = pos_;
      std::string key = string();
      if (!keys.insert(key).second) error_at(key_at, "expected unique keys, but \"" + key + "\" appears twice");
      skip_space();
      if (peek() != ':') error("expected ':' after an object key");
      ++pos_;
      skip_space();
      obj.append_member(std::move(key), value(depth + 1));
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        return obj;
      }
      error("expected ',' or '}' after an object member");
    }
  }

  Value array(int depth) {
    ++pos_;  // '['
    Value arr = Value::array();
    skip_space();
    if (peek() == ']') {
      ++pos_;
      return arr;
    }
    for (;;) {
      skip_space();
      arr.push_back(value(depth + 1));
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == ']') {
        ++pos_;
        return arr;
      }
      error("expected ',' or ']' after an array element");
    }
  }

  unsigned hex4() {
    unsigned v = 0;
    for (int i = 0; i < 4; ++i, ++pos_) {
      const char c = peek();
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f')
        v |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        v |= static_cast<unsigned>(c - 'A' + 10);
      else
        error("expected 4 hexadecimal digits after \\u");
    }
    return v;
  }

  static void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  std::string string() {
    ++pos_;  // opening quote
    std::string out;
    for (;;) {
      if (at_end()) error("expected a closing '\"'");
      const char c = s_[pos_];
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) error("expected no raw control characters in a string (escape them)");
      if (c != '\\') {
        out += c;
        ++pos_;
        continue;
      }
      ++pos_;
      const char e = peek();
      ++pos_;
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
          const size_t at = pos_ - 2;
          unsigned cp = hex4();
          if (cp >= 0xdc00 && cp <= 0xdfff) error_at(at, "expected a high surrogate before a low surrogate");
          if (cp >= 0xd800 && cp <= 0xdbff) {
            if (peek() != '\\' || pos_ + 1 >= s_.size() || s_[pos_ + 1] != 'u')
              error("expected a \\u low surrogate after a high surrogate");
            pos_ += 2;
            const unsigned low = hex4();
            if (low < 0xdc00 || low > 0xdfff) error_at(pos_ - 6, "expected a low surrogate (\\udc00-\\udfff)");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          }
          append_utf8(out, cp);
          break;
        }
        default: error_at(pos_ - 1, "expected an escape: \\\" \\\\ \\/ \\b \\f \\n \\r \\t or \\uXXXX");
      }
    }
  }

  Value number() {
    const size_t start = pos_;
    auto digits = [&]() {
      const size_t from = pos_;
      while (peek() >= '0' && peek() <= '9') ++pos_;
      return pos_ - from;
    };
    if (peek() == '-') ++pos_;
    if (peek() == '0') {
      ++pos_;
      if (peek() >= '0' && peek() <= '9') error("expected no leading zeros in a number");
    } else if (digits() == 0) {
      error("expected a digit");
    }
    bool integral = true;
    if (peek() == '.') {
      integral = false;
      ++pos_;
      if (digits() == 0) error("expected a digit after the decimal point");
    }
    if (peek() == 'e' || peek() == 'E') {
      integral = false;
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (digits() == 0) error("expected a digit in the exponent");
    }
    const char* first = s_.data() + start;
    const char* last = s_.data() + pos_;
    if (integral) {
      int64_t i = 0;
      auto r = std::from_chars(first, last, i);
      if (r.ec == std::errc() && r.ptr == last) return Value::integer(i);
      // Too large for int64: fall through and keep it as a double, like most parsers.
    }
    double d = 0.0;
    auto r = std::from_chars(first, last, d);  // locale-independent, unlike strtod
    if (r.ec != std::errc() || r.ptr != last) error_at(start, "expected a number within the range of a double");
    return Value::number(d);
  }
};

// ---------------------------------------------------------------- writer

void write_string(std::string& out, const std::string& s) {
  static const char* hex = "0123456789abcdef";
  out += '"';
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          out += ch;  // UTF-8 passes through unchanged
        }
    }
  }
  out += '"';
}

void write_value(std::string& out, const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Null: out += "null"; return;
    case Value::Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::Integer: out += std::to_string(v.as_integer()); return;
    case Value::Kind::Number: {
      const double d = v.as_number();
      if (!std::isfinite(d)) fail("JSON cannot represent the number ", d);
      char buf[64];
      auto r = std::to_chars(buf, buf + sizeof buf, d);  // shortest text that reads back exactly
      std::string text(buf, r.ptr);
      // Keep it a number on re-reading, not an integer.
      if (text.find_first_of(".eE") == std::string::npos) text += ".0";
      out += text;
      return;
    }
    case Value::Kind::String: write_string(out, v.as_string()); return;
    case Value::Kind::Array: {
      out += '[';
      bool first = true;
      for (const Value& item : v.as_array()) {
        if (!first) out += ',';
        first = false;
        write_value(out, item);
      }
      out += ']';
      return;
    }
    case Value::Kind::Object: {
      out += '{';
      bool first = true;
      for (const Member& m : v.as_object()) {
        if (!first) out += ',';
        first = false;
        write_string(out, m.key);
        out += ':';
        write_value(out, m.value);
      }
      out += '}';
      return;
    }
  }
}

}  // namespace

Value parse(const std::string& text) { return Parser(text).document(); }

std::string write(const Value& v) {
  std::string out;
  write_value(out, v);
  return out;
}

}  // namespace json
}  // namespace ge
