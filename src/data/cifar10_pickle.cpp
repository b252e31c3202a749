// A pickle interpreter for exactly the values a CIFAR-10 python batch holds: dicts, lists,
// tuples, ints, strings, and numpy's array reconstruction (a REDUCE of
// numpy.core.multiarray._reconstruct, then a BUILD whose state tuple carries shape, dtype and
// the raw bytes). Nothing is ever called or imported: globals are only names. Large strings
// are not loaded, only located, so finding the 30 MB image buffer reads a few kilobytes.
#include "data/cifar10_pickle.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "ganengine/error.h"

namespace ge {
namespace {

// Values live in the interpreter's arena and point at each other with plain pointers: a
// pickle can nest a million lists deep or make a list contain itself through the memo, and
// neither may cost a recursive destructor (a stack overflow) or a reference cycle (a leak).
struct Value;
using Ref = Value*;

struct Value {
  enum class Kind { None, Bool, Int, Float, Bytes, Text, Tuple, List, Dict, Global, Object };
  Kind kind = Kind::None;
  int64_t number = 0;        // Int, Bool
  std::string text;          // Bytes and Text when small, Global as "module.name"
  int64_t file_offset = -1;  // Bytes and Text: where their content starts in the file
  int64_t length = 0;        // Bytes and Text: content size (text holds it only when small)
  std::vector<Ref> items;    // Tuple, List; Dict as key, value, key, value...;
                             // Object as callable, arguments, state (set by BUILD)
};

// A CIFAR-10 batch holds about 20,000 values (10,000 labels and file names); a file that
// makes far more is not one, and must not make us allocate a value per byte of a large file.
constexpr size_t kMaxValues = size_t(1) << 20;

// Strings up to this size are read into memory (dict keys, dtype codes); larger ones (the
// image buffer) are only located and skipped.
constexpr int64_t kLoadedStringLimit = 1 << 16;

// Sequential reads through a buffer, with skips that do not touch the skipped bytes.
class Stream {
 public:
  explicit Stream(const ReadOnlyFile& file) : file_(file) {}

  int64_t position() const { return position_; }

  void read(void* out, int64_t bytes) {
    if (bytes > file_.size() - position_)
      fail(file_.path(), ": the pickle ends early: expected ", bytes, " more bytes at byte ", position_, " of ",
           file_.size(), " (is the file truncated?)");
    auto* dst = static_cast<char*>(out);
    while (bytes > 0) {
      if (buffer_pos_ == buffer_.size()) refill();
      const int64_t n = std::min<int64_t>(bytes, static_cast<int64_t>(buffer_.size() - buffer_pos_));
      std::memcpy(dst, buffer_.data() + buffer_pos_, static_cast<size_t>(n));
      buffer_pos_ += static_cast<size_t>(n);
      position_ += n;
      dst += n;
      bytes -= n;
    }
  }

  void skip(int64_t bytes) {
    if (bytes > file_.size() - position_)
      fail(file_.path(), ": the pickle ends early: a string of ", bytes, " bytes at byte ", position_,
           " runs past the end of the file (", file_.size(), " bytes; is the file truncated?)");
    const int64_t buffered = static_cast<int64_t>(buffer_.size() - buffer_pos_);
    if (bytes <= buffered) {
      buffer_pos_ += static_cast<size_t>(bytes);
    } else {
      buffer_.clear();
      buffer_pos_ = 0;
      buffer_start_ = position_ + bytes;
    }
    position_ += bytes;
  }

  uint8_t byte() {
    uint8_t b = 0;
    read(&b, 1);
    return b;
  }

  // Little-endian unsigned integer of `bytes` bytes.
  uint64_t uint_le(int bytes) {
    uint8_t raw[8] = {};
    read(raw, bytes);
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | raw[i];
    return v;
  }

  std::string line() {
    std::string s;
    for (;;) {
      const char c = static_cast<char>(byte());
      if (c == '\n') return s;
      if (s.size() > 256) fail(file_.path(), ": a pickle GLOBAL name at byte ", position_, " is too long");
      s += c;
    }
  }

 private:
  void refill() {
    buffer_start_ = position_;
    const int64_t n = std::min<int64_t>(kChunk, file_.size() - position_);
    buffer_.resize(static_cast<size_t>(n));
    file_.read_at(buffer_start_, buffer_.data(), n);
    buffer_pos_ = 0;
  }

  static constexpr int64_t kChunk = 1 << 16;
  const ReadOnlyFile& file_;
  std::vector<char> buffer_;
  size_t buffer_pos_ = 0;
  int64_t buffer_start_ = 0;
  int64_t position_ = 0;
};

class Interpreter {
 public:
  explicit Interpreter(const ReadOnlyFile& file) : file_(file), in_(file) {}

  Ref make(Value::Kind kind) {
    if (arena_.size() >= kMaxValues)
      bad(in_.position(), "more than ", kMaxValues, " values (a CIFAR-10 batch holds about 20,000)");
    arena_.emplace_back();
    arena_.back().kind = kind;
    return &arena_.back();
  }

  Ref make_int(int64_t n, Value::Kind kind = Value::Kind::Int) {
    Ref v = make(kind);
    v->number = n;
    return v;
  }

  Ref run() {
    for (;;) {
      const int64_t at = in_.position();
      const uint8_t op = in_.byte();
      if (op == '.') {  // STOP
        if (stack_.size() != 1) bad(at, "STOP with ", stack_.size(), " values on the stack");
        return stack_.back();
      }
      step(op, at);
    }
  }

 private:
  template <class... Parts>
  [[noreturn]] void bad(int64_t at, const Parts&... parts) {
    fail(file_.path(),
         ": not a CIFAR-10 python batch (a pickled dict with a numpy uint8 array under b'data'): ", parts...,
         " at byte ", at);
  }

  Ref pop(int64_t at) {
    if (stack_.size() <= mark_floor()) bad(at, "a pickle opcode needs a value but the stack is empty");
    Ref v = stack_.back();
    stack_.pop_back();
    return v;
  }
  Ref& top(int64_t at) {
    if (stack_.size() <= mark_floor()) bad(at, "a pickle opcode needs a value but the stack is empty");
    return stack_.back();
  }
  size_t mark_floor() const { return marks_.empty() ? 0 : marks_.back(); }

  // The values pushed since the last MARK, which is removed.
  std::vector<Ref> pop_to_mark(int64_t at) {
    if (marks_.empty()) bad(at, "a pickle opcode needs a MARK but there is none");
    const size_t from = marks_.back();
    marks_.pop_back();
    std::vector<Ref> items(stack_.begin() + static_cast<std::ptrdiff_t>(from), stack_.end());
    stack_.resize(from);
    return items;
  }

  void string_value(Value::Kind kind, int64_t length, int64_t at) {
    if (length < 0) bad(at, "a string of negative length");
    Ref v = make(kind);
    v->file_offset = in_.position();
    v->length = length;
    if (length <= kLoadedStringLimit) {
      v->text.resize(static_cast<size_t>(length));
      in_.read(v->text.data(), length);
    } else {
      in_.skip(length);
    }
    stack_.push_back(v);
  }

  void memo_put(uint64_t key, int64_t at) {
    if (key > (1u << 24)) bad(at, "a memo index of ", key);
    memo_[key] = top(at);
  }
  void memo_get(uint64_t key, int64_t at) {
    const auto found = memo_.find(key);
    if (found == memo_.end()) bad(at, "a memo lookup of an index never stored (", key, ")");
    if (stack_.size() >= kMaxValues) bad(at, "more than ", kMaxValues, " values on the stack");
    stack_.push_back(found->second);
  }

  void step(uint8_t op, int64_t at) {
    using K = Value::Kind;
    switch (op) {
      case 0x80: {  // PROTO
        const int version = in_.byte();
        if (version < 2 || version > 5) bad(at, "pickle protocol ", version, " (expected 2)");
        break;
      }
      case 0x95:  // FRAME: a size hint only
        in_.uint_le(8);
        break;
      case '(':
        if (marks_.size() >= kMaxValues) bad(at, "more than ", kMaxValues, " MARKs");
        marks_.push_back(stack_.size());
        break;
      case 'N': stack_.push_back(make(K::None)); break;
      case 0x88: stack_.push_back(make_int(1, K::Bool)); break;
      case 0x89: stack_.push_back(make_int(0, K::Bool)); break;
      case 'J': stack_.push_back(make_int(static_cast<int32_t>(in_.uint_le(4)))); break;
      case 'K': stack_.push_back(make_int(in_.uint_le(1))); break;
      case 'M': stack_.push_back(make_int(in_.uint_le(2))); break;
      case 0x8a: {  // LONG1: little-endian two's complement of n bytes
        const int n = in_.byte();
        if (n > 8) bad(at, "an integer of ", n, " bytes");
        uint64_t v = n ? in_.uint_le(n) : 0;
        if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t(0) << (8 * n);
        stack_.push_back(make_int(static_cast<int64_t>(v)));
        break;
      }
      case 'G':  // BINFLOAT: value unused
        in_.uint_le(8);
        stack_.push_back(make(K::Float));
        break;
      case 'U':  // SHORT_BINSTRING
        string_value(K::Bytes, in_.uint_le(1), at);
        break;
      case 'T':  // BINSTRING
        string_value(K::Bytes, static_cast<int32_t>(in_.uint_le(4)), at);
        break;
      case 'C':  // SHORT_BINBYTES
        string_value(K::Bytes, in_.uint_le(1), at);
        break;
      case 'B':  // BINBYTES
        string_value(K::Bytes, in_.uint_le(4), at);
        break;
      case 0x8e:  // BINBYTES8
        string_value(K::Bytes, static_cast<int64_t>(in_.uint_le(8)), at);
        break;
      case 0x8c:  // SHORT_BINUNICODE
        string_value(K::Text, in_.uint_le(1), at);
        break;
      case 'X':  // BINUNICODE
        string_value(K::Text, in_.uint_le(4), at);
        break;
      case 0x8d:  // BINUNICODE8
        string_value(K::Text, static_cast<int64_t>(in_.uint_le(8)), at);
        break;
      case ']': stack_.push_back(make(K::List)); break;
      case '}': stack_.push_back(make(K::Dict)); break;
      case ')': stack_.push_back(make(K::Tuple)); break;
      case 'a': {  // APPEND
        Ref item = pop(at);
        Ref& list = top(at);
        if (list->kind != K::List) bad(at, "APPEND to something not a list");
        list->items.push_back(item);
        break;
      }
      case 'e': {  // APPENDS
        std::vector<Ref> items = pop_to_mark(at);
        Ref& list = top(at);
        if (list->kind != K::List) bad(at, "APPENDS to something not a list");
        list->items.insert(list->items.end(), items.begin(), items.end());
        break;
      }
      case 's': {  // SETITEM
        Ref value = pop(at);
        Ref key = pop(at);
        Ref& dict = top(at);
        if (dict->kind != K::Dict) bad(at, "SETITEM on something not a dict");
        dict->items.push_back(key);
        dict->items.push_back(value);
        break;
      }
      case 'u': {  // SETITEMS
        std::vector<Ref> items = pop_to_mark(at);
        Ref& dict = top(at);
        if (dict->kind != K::Dict || items.size() % 2) bad(at, "SETITEMS on something not a dict");
        dict->items.insert(dict->items.end(), items.begin(), items.end());
        break;
      }
      case 't': {  // TUPLE
        Ref t = make(K::Tuple);
        t->items = pop_to_mark(at);
        stack_.push_back(t);
        break;
      }
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1, TUPLE2, TUPLE3
        Ref t = make(K::Tuple);
        t->items.resize(op - 0x84u);
        for (size_t i = t->items.size(); i-- > 0;) t->items[i] = pop(at);
        stack_.push_back(t);
        break;
      }
      case 'c': {  // GLOBAL: a name only; nothing is imported
        Ref g = make(K::Global);
        g->text = in_.line();
        g->text += "." + in_.line();
        stack_.push_back(g);
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        Ref name = pop(at);
        Ref module = pop(at);
        Ref g = make(K::Global);
        g->text = module->text + "." + name->text;
        stack_.push_back(g);
        break;
      }
      case 'R':
      case 0x81: {  // REDUCE, NEWOBJ: remember what would be called, with what
        Ref args = pop(at);
        Ref callable = pop(at);
        Ref object = make(K::Object);
        object->items = {callable, args, nullptr};
        stack_.push_back(object);
        break;
      }
      case 'b': {  // BUILD
        Ref state = pop(at);
        Ref& object = top(at);
        if (object->kind != K::Object) bad(at, "BUILD on something not an object");
        object->items[2] = state;
        break;
      }
      case 'q':  // BINPUT
        memo_put(in_.uint_le(1), at);
        break;
      case 'r':  // LONG_BINPUT
        memo_put(in_.uint_le(4), at);
        break;
      case 0x94:  // MEMOIZE
        memo_put(memo_.size(), at);
        break;
      case 'h':  // BINGET
        memo_get(in_.uint_le(1), at);
        break;
      case 'j':  // LONG_BINGET
        memo_get(in_.uint_le(4), at);
        break;
      case '0':  // POP
        pop(at);
        break;
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", op);
        bad(at, "pickle opcode ", hex, " is not one this reader knows");
      }
    }
  }

  const ReadOnlyFile& file_;
  Stream in_;
  std::vector<Ref> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Ref> memo_;
  std::deque<Value> arena_;  // every value made; a deque never moves them
};

bool is_string(const Ref& v, const char* s) {
  return v && (v->kind == Value::Kind::Bytes || v->kind == Value::Kind::Text) && v->text == s;
}

bool is_global(const Ref& v, const char* module_suffix_and_name) {
  if (!v || v->kind != Value::Kind::Global) return false;
  const std::string want = module_suffix_and_name;
  // numpy 1 pickles name numpy.core.multiarray, numpy 2 numpy._core.multiarray.
  return v->text == "numpy.core." + want || v->text == "numpy._core." + want || v->text == "numpy." + want;
}

}  // namespace

PickledImageRows locate_pickled_cifar_data(const ReadOnlyFile& file, int64_t expected_rows,
                                           int64_t expected_row_bytes) {
  Interpreter interpreter(file);
  const Ref root = interpreter.run();
  const std::string expected = "expected a pickled dict whose b'data' is a numpy uint8 array of shape (" +
                               std::to_string(expected_rows) + ", " + std::to_string(expected_row_bytes) + ")";
  if (root->kind != Value::Kind::Dict) fail(file.path(), ": the pickle holds no dict; ", expected);
  Ref array = nullptr;
  for (size_t i = 0; i + 1 < root->items.size(); i += 2)
    if (is_string(root->items[i], "data")) array = root->items[i + 1];
  if (!array) fail(file.path(), ": the pickled dict has no key b'data'; ", expected);

  // ndarray.__reduce__: _reconstruct(ndarray, (0,), b'b'), then BUILD with
  // (version, shape, dtype, is_fortran, raw bytes).
  const bool reconstructed =
      array->kind == Value::Kind::Object && is_global(array->items[0], "multiarray._reconstruct");
  const Ref state = reconstructed ? array->items[2] : nullptr;
  if (!state || state->kind != Value::Kind::Tuple || state->items.size() != 5)
    fail(file.path(), ": b'data' is not a pickled numpy array; ", expected);
  const Ref& shape = state->items[1];
  const Ref& dtype = state->items[2];
  const Ref& raw = state->items[4];

  const bool uint8 = dtype && dtype->kind == Value::Kind::Object && is_global(dtype->items[0], "dtype") &&
                     dtype->items[1] && dtype->items[1]->kind == Value::Kind::Tuple &&
                     !dtype->items[1]->items.empty() && is_string(dtype->items[1]->items[0], "u1");
  if (!uint8) fail(file.path(), ": b'data' is a numpy array of another dtype than uint8; ", expected);

  std::string shape_text = "(";
  bool shape_ok = shape && shape->kind == Value::Kind::Tuple && shape->items.size() == 2;
  for (size_t i = 0; shape && i < shape->items.size(); ++i) {
    const Ref& d = shape->items[i];
    shape_text += (i ? ", " : "") + (d && d->kind == Value::Kind::Int ? std::to_string(d->number) : std::string("?"));
  }
  shape_text += ")";
  if (shape_ok)
    shape_ok = shape->items[0]->kind == Value::Kind::Int && shape->items[0]->number == expected_rows &&
               shape->items[1]->kind == Value::Kind::Int && shape->items[1]->number == expected_row_bytes;
  if (!shape_ok) fail(file.path(), ": b'data' has shape ", shape_text, "; ", expected);
  if (state->items[3]->kind != Value::Kind::Bool || state->items[3]->number != 0)
    fail(file.path(), ": b'data' is stored in Fortran order; ", expected, " in C order");

  if (!raw || raw->kind != Value::Kind::Bytes)
    fail(file.path(), ": b'data' carries no raw byte string (was it pickled by Python 3 with protocol 2?); ", expected);
  if (raw->length != expected_rows * expected_row_bytes)
    fail(file.path(), ": b'data' holds ", raw->length, " bytes, expected ", expected_rows * expected_row_bytes, " (",
         expected_rows, " x ", expected_row_bytes, ")");
  return {raw->file_offset, expected_rows, expected_row_bytes};
}

}  // namespace ge
