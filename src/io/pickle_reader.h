// A pickle reader that executes no Python: it runs the opcodes of protocols 2 to 5 that
// torch.save's state_dicts use and builds a tree of plain values. A call (REDUCE, NEWOBJ) is
// not carried out but recorded as an Object naming its callable, arguments, the items and
// entries added to it and BUILD's state, for the caller to interpret (pth_reader.cpp knows
// which callables a state_dict may name). Persistent ids (torch's storages) are kept as
// PersistentId values.
//
// Values live in an arena owned by the PickleTree, so memo references, sharing and cycles
// cost nothing and free nothing twice; a reader of the tree must bound its own recursion.
// Every length is checked against the bytes left and every stack access against the stack, so
// a corrupt or hostile pickle ends in a ge::Error naming the source, the opcode and its offset.
#pragma once
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ge {

struct PickleValue {
  enum class Kind { None, Bool, Int, BigInt, Float, String, Bytes, Tuple, List, Dict, Global, Object, PersistentId };
  Kind kind = Kind::None;
  bool boolean = false;
  int64_t integer = 0;
  double number = 0;
  std::string text;                       // String and Bytes; Global: "module.name"; BigInt: its little-endian bytes
  std::vector<const PickleValue*> items;  // Tuple, List; Object: APPEND(S) onto it
  std::vector<std::pair<const PickleValue*, const PickleValue*>> entries;  // Dict; Object: SETITEM(S)
  const PickleValue* callable = nullptr;                                   // Object: the Global called or instantiated
  const PickleValue* args = nullptr;   // Object: its argument tuple; PersistentId: the id
  const PickleValue* state = nullptr;  // Object: BUILD's argument, if any

  bool is(Kind k) const { return kind == k; }
  // An Object whose callable is the Global "module.name".
  bool is_call_of(std::string_view qualified_name) const;
};

const char* pickle_kind_name(PickleValue::Kind kind);

class PickleTree {
 public:
  // Runs the pickle that starts at bytes[offset] up to its STOP. `what` names the source in
  // errors. The values point into this tree.
  PickleTree(std::string_view bytes, size_t offset, const std::string& what);
  PickleTree(const PickleTree&) = delete;
  PickleTree& operator=(const PickleTree&) = delete;

  const PickleValue& root() const { return *root_; }
  // The offset just past the STOP opcode: where a following pickle or data begins.
  size_t end() const { return end_; }

 private:
  std::deque<PickleValue> arena_;  // stable addresses
  const PickleValue* root_ = nullptr;
  size_t end_ = 0;
  friend class PickleMachine;
};

}  // namespace ge
