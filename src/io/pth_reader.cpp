// torch.save's two formats read into tensors. The pickle is first turned into descriptions of
// tensors (storage key, dtype, offset, shape, strides), then each container format supplies
// the storages' bytes, and every element a tensor reaches is checked to lie in its storage.
#include "io/pth_reader.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <vector>

#include "ganengine/error.h"
#include "io/pickle_reader.h"
#include "io/zip_reader.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "torch.save's storages are read as host memory");

namespace ge {
namespace {

using Kind = PickleValue::Kind;

constexpr int64_t kLegacyProtocolVersion = 1001;
// torch.serialization.MAGIC_NUMBER, 0x1950a86a20f9469cfc6c, as LONG1 stores it.
constexpr unsigned char kLegacyMagic[] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

struct TensorDescription {
  std::string storage_key;
  DType dtype = DType::F32;
  int64_t storage_numel = 0;  // as the persistent id states it
  int64_t offset = 0;
  Shape shape;
  std::vector<int64_t> strides;
};

struct NamedTensor {
  std::string name;
  TensorDescription desc;
};

DType dtype_of_storage(const std::string& what, const std::string& type) {
  static const std::pair<const char*, DType> known[] = {
      {"torch.FloatStorage", DType::F32},     {"torch.DoubleStorage", DType::F64}, {"torch.HalfStorage", DType::F16},
      {"torch.BFloat16Storage", DType::BF16}, {"torch.LongStorage", DType::I64},   {"torch.ByteStorage", DType::U8}};
  for (const auto& [name, dtype] : known)
    if (type == name) return dtype;
  fail(what, ": a tensor stored as ", type,
       "; expected FloatStorage, DoubleStorage, HalfStorage, BFloat16Storage, LongStorage or ByteStorage");
}

int64_t as_int(const std::string& what, const std::string& where, const PickleValue* v) {
  if (!v || !v->is(Kind::Int))
    fail(what, ": ", where, ": expected an int, found ", v ? pickle_kind_name(v->kind) : "nothing");
  return v->integer;
}

std::vector<int64_t> as_ints(const std::string& what, const std::string& where, const PickleValue* v) {
  if (!v || !v->is(Kind::Tuple))
    fail(what, ": ", where, ": expected a tuple of ints, found ", v ? pickle_kind_name(v->kind) : "nothing");
  std::vector<int64_t> out;
  for (const PickleValue* item : v->items) out.push_back(as_int(what, where, item));
  return out;
}

// The storage a tensor is built on: torch's persistent id tuple.
void describe_storage(const std::string& what, const std::string& name, const PickleValue* v, TensorDescription& d) {
  const std::string where = "tensor '" + name + "'";
  if (!v || !v->is(Kind::PersistentId) || !v->args->is(Kind::Tuple))
    fail(what, ": ", where, ": expected its storage as a persistent id, found ",
         v ? pickle_kind_name(v->kind) : "nothing");
  const std::vector<const PickleValue*>& id = v->args->items;
  if (id.size() < 5 || !id[0]->is(Kind::String) || id[0]->text != "storage" || !id[1]->is(Kind::Global) ||
      !id[2]->is(Kind::String))
    fail(what, ": ", where, ": its storage's id is not ('storage', type, key, location, numel)");
  d.dtype = dtype_of_storage(what, id[1]->text);
  d.storage_key = id[2]->text;
  d.storage_numel = as_int(what, where + "'s storage size", id[4]);
  if (d.storage_numel < 0) fail(what, ": ", where, ": storage of ", d.storage_numel, " elements");
  if (id.size() > 5 && !id[5]->is(Kind::None))
    fail(what, ": ", where, ": a view into a shared storage (PyTorch 0.3's format); re-save it with a current torch");
}

// A tensor as _rebuild_tensor_v2 (storage, offset, size, stride, ...) or _rebuild_tensor
// (storage, offset, size, stride) describes it; _rebuild_parameter wraps one.
TensorDescription describe_tensor(const std::string& what, const std::string& name, const PickleValue* v) {
  const std::string where = "tensor '" + name + "'";
  if (v->is_call_of("torch._utils._rebuild_parameter") || v->is_call_of("torch._utils._rebuild_parameter_with_state")) {
    if (v->args->items.empty()) fail(what, ": ", where, ": a parameter without its data");
    v = v->args->items[0];  // a parameter's data is a plain tensor: unwrapped once, no recursion
  }
  if (!v->is_call_of("torch._utils._rebuild_tensor_v2") && !v->is_call_of("torch._utils._rebuild_tensor")) {
    const std::string kind = v->is(Kind::Object) && v->callable->is(Kind::Global)
                                 ? "an object made by " + v->callable->text
                                 : std::string("a ") + pickle_kind_name(v->kind);
    fail(what, ": entry '", name, "' is ", kind, ", not a tensor; expected a state_dict of tensors");
  }
  const std::vector<const PickleValue*>& args = v->args->items;
  if (args.size() < 4) fail(what, ": ", where, ": ", args.size(), " arguments to rebuild it; expected at least 4");
  TensorDescription d;
  describe_storage(what, name, args[0], d);
  d.offset = as_int(what, where + " offset", args[1]);
  d.shape = as_ints(what, where + " size", args[2]);
  d.strides = as_ints(what, where + " stride", args[3]);
  if (d.shape.size() != d.strides.size())
    fail(what, ": ", where, ": size has ", d.shape.size(), " dimensions, stride ", d.strides.size());
  if (d.offset < 0) fail(what, ": ", where, ": negative storage offset ", d.offset);
  // The last element reached must lie inside the storage: offset + sum((size - 1) * stride).
  int64_t numel = 1;
  uint64_t last = static_cast<uint64_t>(d.offset);
  for (size_t i = 0; i < d.shape.size(); ++i) {
    const int64_t n = d.shape[i];
    const int64_t s = d.strides[i];
    if (n < 0 || s < 0) fail(what, ": ", where, ": size or stride below zero");
    if (n == 0) {
      numel = 0;
      continue;
    }
    if (numel > std::numeric_limits<int64_t>::max() / n) fail(what, ": ", where, ": more elements than fit in 64 bits");
    numel *= n;
    if (static_cast<uint64_t>(s) > (std::numeric_limits<uint64_t>::max() / 4 - last) / static_cast<uint64_t>(n))
      fail(what, ": ", where, ": strides reach beyond any storage");
    last += static_cast<uint64_t>(n - 1) * static_cast<uint64_t>(s);
  }
  if (numel > 0 && last >= static_cast<uint64_t>(d.storage_numel))
    fail(what, ": ", where, ": reaches element ", last, " of a storage of ", d.storage_numel, " elements");
  return d;
}

// The state_dict at the pickle's root: an OrderedDict (REDUCE of collections.OrderedDict with
// SETITEMS, the module's _metadata as BUILD state, which is not needed) or a plain dict.
std::vector<NamedTensor> describe_state_dict(const std::string& what, const PickleValue& root) {
  const bool ordered = root.is_call_of("collections.OrderedDict");
  if (!ordered && !root.is(Kind::Dict)) {
    if (root.is(Kind::Object) && root.callable->is(Kind::Global))
      fail(what, ": holds an object made by ", root.callable->text,
           " (a whole pickled model?), not a state_dict; save the weights with torch.save(net.state_dict(), PATH)");
    fail(what, ": holds a ", pickle_kind_name(root.kind), ", not a state_dict (a dict of tensors)");
  }
  std::vector<NamedTensor> out;
  for (const auto& [key, value] : root.entries) {
    if (!key->is(Kind::String)) fail(what, ": a state_dict key is a ", pickle_kind_name(key->kind), ", not a str");
    out.push_back({key->text, describe_tensor(what, key->text, value)});
  }
  if (out.empty()) fail(what, ": the state_dict is empty");
  return out;
}

// The tensor's elements gathered from its storage (bounds were checked when it was described).
Tensor materialise(const TensorDescription& d, const char* storage) {
  Tensor t = Tensor::empty(d.shape, d.dtype);
  const size_t elem = dtype_size(d.dtype);
  const int64_t numel = t.numel();
  if (numel == 0) return t;
  char* out = static_cast<char*>(t.data());
  bool contiguous = true;
  int64_t expected = 1;
  for (size_t i = d.shape.size(); i-- > 0;) {
    if (d.shape[i] != 1 && d.strides[i] != expected) contiguous = false;
    expected *= d.shape[i];
  }
  if (contiguous) {
    std::memcpy(out, storage + static_cast<size_t>(d.offset) * elem, static_cast<size_t>(numel) * elem);
    return t;
  }
  std::vector<int64_t> index(d.shape.size(), 0);
  for (int64_t i = 0; i < numel; ++i) {
    int64_t at = d.offset;
    for (size_t k = 0; k < index.size(); ++k) at += index[k] * d.strides[k];
    std::memcpy(out + static_cast<size_t>(i) * elem, storage + static_cast<size_t>(at) * elem, elem);
    for (size_t k = index.size(); k-- > 0;) {
      if (++index[k] < d.shape[k]) break;
      index[k] = 0;
    }
  }
  return t;
}

std::map<std::string, Tensor> read_zip_format(std::string_view bytes, const std::string& what) {
  const ZipArchive zip(bytes, what);
  const ZipEntry* pickle = nullptr;
  for (const ZipEntry& e : zip.entries()) {
    const size_t slash = e.name.find('/');
    if (slash != std::string::npos && e.name.compare(slash, std::string::npos, "/data.pkl") == 0) {
      pickle = &e;
      break;
    }
  }
  if (!pickle) fail(what, ": a ZIP archive without '<name>/data.pkl'; expected a file written by torch.save (a .pth)");
  const std::string prefix = pickle->name.substr(0, pickle->name.size() - std::string("data.pkl").size());
  if (const ZipEntry* order = zip.find(prefix + "byteorder")) {
    const std::string byteorder = zip.read(*order);
    if (byteorder != "little")
      fail(what, ": storages in byte order '", byteorder, "'; only little-endian files are read");
  }
  const std::string pickled = zip.read(*pickle);
  const PickleTree tree(pickled, 0, what + " (" + pickle->name + ")");
  std::map<std::string, std::string> storages;
  std::map<std::string, Tensor> out;
  for (const NamedTensor& nt : describe_state_dict(what, tree.root())) {
    const TensorDescription& d = nt.desc;
    auto it = storages.find(d.storage_key);
    if (it == storages.end()) {
      const ZipEntry* e = zip.find(prefix + "data/" + d.storage_key);
      if (!e) fail(what, ": tensor '", nt.name, "': its storage '", prefix, "data/", d.storage_key, "' is missing");
      it = storages.emplace(d.storage_key, zip.read(*e)).first;
    }
    const uint64_t need = static_cast<uint64_t>(d.storage_numel) * dtype_size(d.dtype);
    if (it->second.size() != need)
      fail(what, ": tensor '", nt.name, "': storage '", d.storage_key, "' has ", it->second.size(), " bytes; ",
           d.storage_numel, " elements of ", dtype_name(d.dtype), " need ", need);
    if (!out.emplace(nt.name, materialise(d, it->second.data())).second)
      fail(what, ": the state_dict names '", nt.name, "' twice");
  }
  return out;
}

std::map<std::string, Tensor> read_legacy_format(std::string_view bytes, const std::string& what) {
  const PickleTree magic(bytes, 0, what);
  const PickleValue& m = magic.root();
  if (!m.is(Kind::BigInt) ||
      m.text != std::string_view(reinterpret_cast<const char*>(kLegacyMagic), sizeof kLegacyMagic))
    fail(what,
         ": a pickle, but not one torch.save wrote (no magic number); expected a state_dict saved with torch.save");
  const PickleTree version(bytes, magic.end(), what);
  if (!version.root().is(Kind::Int) || version.root().integer != kLegacyProtocolVersion)
    fail(what, ": torch.save's legacy format of an unknown version; expected ", kLegacyProtocolVersion);
  const PickleTree system(bytes, version.end(), what);
  if (system.root().is(Kind::Dict))
    for (const auto& [key, value] : system.root().entries)
      if (key->is(Kind::String) && key->text == "little_endian" && value->is(Kind::Bool) && !value->boolean)
        fail(what, ": saved on a big-endian machine; only little-endian files are read");
  const PickleTree state(bytes, system.end(), what);
  const std::vector<NamedTensor> tensors = describe_state_dict(what, state.root());
  const PickleTree keys(bytes, state.end(), what);
  if (!keys.root().is(Kind::List)) fail(what, ": the list of storage keys is missing");

  // Each storage's element size comes from the tensors on it.
  std::map<std::string, DType> dtype_of;
  for (const NamedTensor& nt : tensors) dtype_of.emplace(nt.desc.storage_key, nt.desc.dtype);
  std::map<std::string, std::pair<size_t, int64_t>> where;  // key -> (byte offset, element count)
  size_t at = keys.end();
  for (const PickleValue* key : keys.root().items) {
    if (!key->is(Kind::String)) fail(what, ": a storage key is a ", pickle_kind_name(key->kind), ", not a str");
    auto dt = dtype_of.find(key->text);
    if (dt == dtype_of.end()) fail(what, ": storage '", key->text, "' is listed but no tensor uses it");
    if (bytes.size() - at < 8) fail(what, ": storage '", key->text, "' is cut off (truncated?)");
    int64_t numel = 0;
    std::memcpy(&numel, bytes.data() + at, 8);
    at += 8;
    const size_t elem = dtype_size(dt->second);
    if (numel < 0 || static_cast<uint64_t>(numel) > (bytes.size() - at) / elem)
      fail(what, ": storage '", key->text, "' claims ", numel, " elements, more than the file holds (truncated?)");
    where[key->text] = {at, numel};
    at += static_cast<size_t>(numel) * elem;
  }
  std::map<std::string, Tensor> out;
  for (const NamedTensor& nt : tensors) {
    auto it = where.find(nt.desc.storage_key);
    if (it == where.end()) fail(what, ": tensor '", nt.name, "': storage '", nt.desc.storage_key, "' is missing");
    if (it->second.second != nt.desc.storage_numel)
      fail(what, ": tensor '", nt.name, "': storage '", nt.desc.storage_key, "' holds ", it->second.second,
           " elements, its id says ", nt.desc.storage_numel);
    if (!out.emplace(nt.name, materialise(nt.desc, bytes.data() + it->second.first)).second)
      fail(what, ": the state_dict names '", nt.name, "' twice");
  }
  return out;
}

std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open: ", std::strerror(errno));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail(path, ": read error");
  return bytes;
}

}  // namespace

std::map<std::string, Tensor> parse_pth_state_dict(std::string_view bytes, const std::string& what) {
  if (looks_like_zip(bytes)) return read_zip_format(bytes, what);
  if (!bytes.empty() && static_cast<uint8_t>(bytes[0]) == 0x80) return read_legacy_format(bytes, what);
  fail(what, ": neither a ZIP archive nor a pickle; expected a file written by torch.save (a .pth)");
}

std::map<std::string, Tensor> load_pth_state_dict(const std::string& path) {
  return parse_pth_state_dict(read_whole_file(path), path);
}

}  // namespace ge
