// The pickle machine: a stack of values with marks, a memo, and one case per opcode.
// Opcode meanings: CPython's Lib/pickletools.py (the reference documentation of the format).
#include "io/pickle_reader.h"

#include <cstring>
#include <unordered_map>

#include "ganengine/error.h"

namespace ge {

bool PickleValue::is_call_of(std::string_view qualified_name) const {
  return kind == Kind::Object && callable && callable->kind == Kind::Global && callable->text == qualified_name;
}

const char* pickle_kind_name(PickleValue::Kind kind) {
  switch (kind) {
    case PickleValue::Kind::None: return "None";
    case PickleValue::Kind::Bool: return "bool";
    case PickleValue::Kind::Int: return "int";
    case PickleValue::Kind::BigInt: return "int (over 64 bits)";
    case PickleValue::Kind::Float: return "float";
    case PickleValue::Kind::String: return "str";
    case PickleValue::Kind::Bytes: return "bytes";
    case PickleValue::Kind::Tuple: return "tuple";
    case PickleValue::Kind::List: return "list";
    case PickleValue::Kind::Dict: return "dict";
    case PickleValue::Kind::Global: return "class or function";
    case PickleValue::Kind::Object: return "object";
    case PickleValue::Kind::PersistentId: return "persistent id";
  }
  return "value";
}

class PickleMachine {
 public:
  PickleMachine(PickleTree& tree, std::string_view bytes, size_t offset, const std::string& what)
      : tree_(tree), bytes_(bytes), at_(offset), what_(what) {}

  void run() {
    for (;;) {
      op_at_ = at_;
      op_ = byte();
      if (op_ == '.') break;  // STOP
      step();
    }
    if (stack_.size() != 1 || !marks_.empty())
      error("STOP with ", stack_.size(), " values and ", marks_.size(), " marks on the stack; expected one value");
    tree_.root_ = stack_.back();
    tree_.end_ = at_;
  }

 private:
  using Kind = PickleValue::Kind;
  static constexpr size_t kMaxValues = size_t{1} << 21;

  template <class... Parts>
  [[noreturn]] void error(const Parts&... parts) const {
    fail(what_, ": pickle opcode 0x", hex(op_), " at byte ", op_at_, ": ", parts...);
  }
  static std::string hex(uint8_t v) {
    const char* digits = "0123456789abcdef";
    return {digits[v >> 4], digits[v & 15]};
  }

  // ---- input
  std::string_view take(uint64_t n) {
    if (n > bytes_.size() - at_) error("needs ", n, " more bytes, the data has ", bytes_.size() - at_, " (truncated?)");
    std::string_view s = bytes_.substr(at_, n);
    at_ += n;
    return s;
  }
  uint8_t byte() {
    if (at_ >= bytes_.size()) {
      op_at_ = at_;
      fail(what_, ": the pickle ends at byte ", at_, " without its STOP opcode (truncated?)");
    }
    return static_cast<uint8_t>(bytes_[at_++]);
  }
  uint64_t unsigned_le(int width) {
    std::string_view s = take(static_cast<uint64_t>(width));
    uint64_t v = 0;
    for (int i = width - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(s[static_cast<size_t>(i)]);
    return v;
  }
  std::string_view line() {
    const size_t end = bytes_.find('\n', at_);
    if (end == std::string_view::npos) error("a text argument without its newline (truncated?)");
    std::string_view s = bytes_.substr(at_, end - at_);
    at_ = end + 1;
    return s;
  }

  // ---- values and the stack
  PickleValue* make(Kind kind) {
    // A state_dict needs about twenty values a tensor; a pickle that builds millions is no
    // state_dict, and must not take gigabytes before that is seen.
    if (tree_.arena_.size() >= kMaxValues) error("builds more than ", kMaxValues, " values; not a state_dict");
    tree_.arena_.emplace_back();
    tree_.arena_.back().kind = kind;
    return &tree_.arena_.back();
  }
  void push(PickleValue* v) {
    if (stack_.size() >= kMaxValues) error("a stack deeper than ", kMaxValues, " values; not a state_dict");
    stack_.push_back(v);
  }
  PickleValue* pop() {
    if (stack_.size() <= floor()) error("pops an empty stack (or past a mark)");
    PickleValue* v = stack_.back();
    stack_.pop_back();
    return v;
  }
  PickleValue* top() {
    if (stack_.size() <= floor()) error("needs a value on the stack, found none");
    return stack_.back();
  }
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  // The values above the last mark, which is removed.
  std::vector<PickleValue*> pop_mark() {
    if (marks_.empty()) error("needs a MARK, found none");
    std::vector<PickleValue*> values(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return values;
  }
  PickleValue* tuple_of(const std::vector<PickleValue*>& values) {
    PickleValue* t = make(Kind::Tuple);
    t->items.assign(values.begin(), values.end());
    return t;
  }
  PickleValue* text(Kind kind, std::string_view s) {
    PickleValue* v = make(kind);
    v->text.assign(s);
    return v;
  }
  PickleValue* integer(int64_t i) {
    PickleValue* v = make(Kind::Int);
    v->integer = i;
    return v;
  }
  // LONG1/LONG4: little-endian two's complement of n bytes.
  PickleValue* long_integer(uint64_t n) {
    std::string_view s = take(n);
    if (n > 8) return text(Kind::BigInt, s);
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;) v = (v << 8) | static_cast<uint8_t>(s[i]);
    if (n > 0 && n < 8 && (static_cast<uint8_t>(s[n - 1]) & 0x80)) v |= ~uint64_t{0} << (8 * n);
    int64_t signed_value = 0;
    std::memcpy(&signed_value, &v, sizeof v);
    return integer(signed_value);
  }
  void memo_put(uint64_t key) { memo_[key] = top(); }
  void memo_get(uint64_t key) {
    auto it = memo_.find(key);
    if (it == memo_.end()) error("memo key ", key, " was never stored");
    push(it->second);
  }
  void add_entries(PickleValue* target, const std::vector<PickleValue*>& kv) {
    if (!target->is(Kind::Dict) && !target->is(Kind::Object))
      error("sets items on a ", pickle_kind_name(target->kind), "; expected a dict");
    if (kv.size() % 2) error("an odd number of values (", kv.size(), ") for key/value pairs");
    for (size_t i = 0; i < kv.size(); i += 2) target->entries.emplace_back(kv[i], kv[i + 1]);
  }
  void add_items(PickleValue* target, const std::vector<PickleValue*>& values) {
    if (!target->is(Kind::List) && !target->is(Kind::Object))
      error("appends to a ", pickle_kind_name(target->kind), "; expected a list");
    target->items.insert(target->items.end(), values.begin(), values.end());
  }
  PickleValue* call(PickleValue* callable, PickleValue* args) {
    if (!args->is(Kind::Tuple)) error("calls with a ", pickle_kind_name(args->kind), " of arguments; expected a tuple");
    PickleValue* o = make(Kind::Object);
    o->callable = callable;
    o->args = args;
    return o;
  }
  PickleValue* global(std::string_view module, std::string_view name) {
    return text(Kind::Global, std::string(module) + "." + std::string(name));
  }

  void step() {
    switch (op_) {
      case 0x80: {  // PROTO
        const uint8_t version = byte();
        if (version < 2 || version > 5) error("protocol ", int{version}, "; expected 2 to 5");
        return;
      }
      case 0x95: take(8); return;  // FRAME: a size hint
      case '(':                    // MARK
        if (marks_.size() >= kMaxValues) error("more than ", kMaxValues, " open marks; not a state_dict");
        marks_.push_back(stack_.size());
        return;
      case '0': pop(); return;        // POP
      case '1': pop_mark(); return;   // POP_MARK
      case '2': push(top()); return;  // DUP
      case 'N': push(make(Kind::None)); return;
      case 0x88:
      case 0x89: {  // NEWTRUE, NEWFALSE
        PickleValue* v = make(Kind::Bool);
        v->boolean = op_ == 0x88;
        push(v);
        return;
      }
      case 'J': {  // BININT: signed 32-bit
        const uint32_t u = static_cast<uint32_t>(unsigned_le(4));
        int32_t s = 0;
        std::memcpy(&s, &u, sizeof s);
        push(integer(s));
        return;
      }
      case 'K': push(integer(static_cast<int64_t>(unsigned_le(1)))); return;  // BININT1
      case 'M': push(integer(static_cast<int64_t>(unsigned_le(2)))); return;  // BININT2
      case 0x8a: push(long_integer(unsigned_le(1))); return;                  // LONG1
      case 0x8b: push(long_integer(unsigned_le(4))); return;                  // LONG4
      case 'G': {                                                             // BINFLOAT: big-endian double
        std::string_view s = take(8);
        uint64_t bits = 0;
        for (char c : s) bits = (bits << 8) | static_cast<uint8_t>(c);
        PickleValue* v = make(Kind::Float);
        std::memcpy(&v->number, &bits, sizeof bits);
        push(v);
        return;
      }
      case 'X': push(text(Kind::String, take(unsigned_le(4)))); return;   // BINUNICODE
      case 0x8c: push(text(Kind::String, take(unsigned_le(1)))); return;  // SHORT_BINUNICODE
      case 0x8d: push(text(Kind::String, take(unsigned_le(8)))); return;  // BINUNICODE8
      case 'T': push(text(Kind::String, take(unsigned_le(4)))); return;   // BINSTRING (Python 2 str)
      case 'U': push(text(Kind::String, take(unsigned_le(1)))); return;   // SHORT_BINSTRING
      case 'B': push(text(Kind::Bytes, take(unsigned_le(4)))); return;    // BINBYTES
      case 'C': push(text(Kind::Bytes, take(unsigned_le(1)))); return;    // SHORT_BINBYTES
      case 0x8e: push(text(Kind::Bytes, take(unsigned_le(8)))); return;   // BINBYTES8
      case ')': push(make(Kind::Tuple)); return;                          // EMPTY_TUPLE
      case 't': push(tuple_of(pop_mark())); return;                       // TUPLE
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1..3
        std::vector<PickleValue*> values(static_cast<size_t>(op_ - 0x84));
        for (size_t i = values.size(); i-- > 0;) values[i] = pop();
        push(tuple_of(values));
        return;
      }
      case ']': push(make(Kind::List)); return;  // EMPTY_LIST
      case 'l': {                                // LIST
        std::vector<PickleValue*> values = pop_mark();
        PickleValue* l = make(Kind::List);
        add_items(l, values);
        push(l);
        return;
      }
      case 'a': {  // APPEND
        PickleValue* v = pop();
        add_items(top(), {v});
        return;
      }
      case 'e': {  // APPENDS
        std::vector<PickleValue*> values = pop_mark();
        add_items(top(), values);
        return;
      }
      case '}': push(make(Kind::Dict)); return;  // EMPTY_DICT
      case 'd': {                                // DICT
        std::vector<PickleValue*> kv = pop_mark();
        PickleValue* d = make(Kind::Dict);
        add_entries(d, kv);
        push(d);
        return;
      }
      case 's': {  // SETITEM
        PickleValue* value = pop();
        PickleValue* key = pop();
        add_entries(top(), {key, value});
        return;
      }
      case 'u': {  // SETITEMS
        std::vector<PickleValue*> kv = pop_mark();
        add_entries(top(), kv);
        return;
      }
      case 'c': {  // GLOBAL: "module\nname\n"
        const std::string module(line());
        const std::string name(line());
        push(global(module, name));
        return;
      }
      case 0x93: {  // STACK_GLOBAL
        PickleValue* name = pop();
        PickleValue* module = pop();
        if (!name->is(Kind::String) || !module->is(Kind::String)) error("expects two strings, module and name");
        push(global(module->text, name->text));
        return;
      }
      case 'R': {  // REDUCE
        PickleValue* args = pop();
        PickleValue* callable = pop();
        push(call(callable, args));
        return;
      }
      case 0x81: {  // NEWOBJ
        PickleValue* args = pop();
        PickleValue* cls = pop();
        push(call(cls, args));
        return;
      }
      case 0x92: {  // NEWOBJ_EX: keyword arguments are not kept
        pop();
        PickleValue* args = pop();
        PickleValue* cls = pop();
        push(call(cls, args));
        return;
      }
      case 'b': {  // BUILD
        PickleValue* state = pop();
        PickleValue* target = top();
        if (!target->is(Kind::Object)) error("BUILD on a ", pickle_kind_name(target->kind), "; expected an object");
        target->state = state;
        return;
      }
      case 'Q': {  // BINPERSID
        PickleValue* id = make(Kind::PersistentId);
        id->args = pop();
        push(id);
        return;
      }
      case 'q': memo_put(unsigned_le(1)); return;  // BINPUT
      case 'r': memo_put(unsigned_le(4)); return;  // LONG_BINPUT
      case 0x94: memo_put(memo_.size()); return;   // MEMOIZE
      case 'h': memo_get(unsigned_le(1)); return;  // BINGET
      case 'j': memo_get(unsigned_le(4)); return;  // LONG_BINGET
      default: error("is not one that a state_dict's pickle uses (protocols 2 to 5; expected torch.save's output)");
    }
  }

  PickleTree& tree_;
  std::string_view bytes_;
  size_t at_;
  size_t op_at_ = 0;
  uint8_t op_ = 0;
  const std::string& what_;
  std::vector<PickleValue*> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, PickleValue*> memo_;
};

PickleTree::PickleTree(std::string_view bytes, size_t offset, const std::string& what) {
  if (offset > bytes.size()) fail(what, ": a pickle at byte ", offset, " past the end of the data");
  PickleMachine(*this, bytes, offset, what).run();
}

}  // namespace ge
