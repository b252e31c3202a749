// safetensors reader and writer. The reader trusts nothing in the file: every length, offset
// and shape is checked against the others and against the file size before any allocation or
// read, and each failure names the file and the expectation it broke.
#include "ganengine/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "core/checked_size.h"
#include "io/atomic_file.h"
#include "io/file_kind.h"
#include "io/json.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian; this build reads and writes it as host memory");

namespace ge {
namespace {

constexpr const char* kMetadataKey = "__metadata__";
constexpr size_t kLengthPrefixBytes = 8;

// ---------------------------------------------------------------- reading

// A read-only file descriptor that closes itself.
class InputFile {
 public:
  explicit InputFile(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) fail(path, ": cannot open safetensors file: ", std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_, &st) != 0) fail(path, ": cannot stat: ", std::strerror(errno));
    if (!S_ISREG(st.st_mode)) fail(path, ": expected a regular file");
    size_ = static_cast<uint64_t>(st.st_size);
  }
  ~InputFile() { ::close(fd_); }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  uint64_t size() const { return size_; }

  void read_at(uint64_t offset, void* dst, uint64_t bytes) const {
    char* p = static_cast<char*>(dst);
    while (bytes > 0) {
      const ssize_t n = ::pread(fd_, p, std::min<uint64_t>(bytes, 1u << 30), static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail(path_, ": read error at byte ", offset, ": ", std::strerror(errno));
      if (n == 0) fail(path_, ": unexpected end of file at byte ", offset, " (the file shrank while being read?)");
      p += n;
      offset += static_cast<uint64_t>(n);
      bytes -= static_cast<uint64_t>(n);
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// One tensor as the header describes it, validated on its own.
struct HeaderEntry {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

uint64_t checked_integer(const std::string& path, const std::string& what, const json::Value& v) {
  if (!v.is_integer()) fail(path, ": ", what, ": expected a non-negative integer, got a ", json::kind_name(v.kind()));
  if (v.as_integer() < 0) fail(path, ": ", what, ": expected a non-negative integer, got ", v.as_integer());
  return static_cast<uint64_t>(v.as_integer());
}

HeaderEntry parse_entry(const std::string& path, const std::string& name, const json::Value& v) {
  const std::string where = "tensor '" + name + "'";
  if (!v.is_object())
    fail(path, ": ", where, ": expected an object with dtype, shape and data_offsets, got a ",
         json::kind_name(v.kind()));
  HeaderEntry e;
  e.name = name;

  const json::Value* dtype = v.find("dtype");
  if (!dtype || !dtype->is_string()) fail(path, ": ", where, ": expected a string field \"dtype\"");
  try {
    e.dtype = safetensors_dtype_from_name(dtype->as_string());
  } catch (const Error& err) {
    fail(path, ": ", where, ": ", err.what());
  }

  const json::Value* shape = v.find("shape");
  if (!shape || !shape->is_array()) fail(path, ": ", where, ": expected an array field \"shape\"");
  int64_t numel = 1;
  for (size_t i = 0; i < shape->as_array().size(); ++i) {
    const json::Value& d = shape->as_array()[i];
    if (!d.is_integer() || d.as_integer() < 0)
      fail(path, ": ", where, ": expected shape[", i, "] to be a non-negative integer, got ",
           d.is_integer() ? std::to_string(d.as_integer()) : std::string("a ") + json::kind_name(d.kind()));
    const int64_t dim = d.as_integer();
    numel = checked_mul(numel, dim, path + ": " + where + ": shape " + json::write(*shape) + " (elements in 64 bits)");
    e.shape.push_back(dim);
  }

  const json::Value* offsets = v.find("data_offsets");
  if (!offsets || !offsets->is_array() || offsets->as_array().size() != 2)
    fail(path, ": ", where, ": expected a field \"data_offsets\" of two integers [begin, end]");
  e.begin = checked_integer(path, where + " data_offsets[0]", offsets->as_array()[0]);
  e.end = checked_integer(path, where + " data_offsets[1]", offsets->as_array()[1]);
  if (e.end < e.begin) fail(path, ": ", where, ": data_offsets [", e.begin, ", ", e.end, "] end before they begin");

  const uint64_t bytes = static_cast<uint64_t>(
      checked_mul(numel, static_cast<int64_t>(dtype_size(e.dtype)), path + ": " + where + ": tensor bytes"));
  if (e.end - e.begin != bytes)
    fail(path, ": ", where, ": data_offsets [", e.begin, ", ", e.end, "] span ", e.end - e.begin, " bytes, but dtype ",
         safetensors_dtype_name(e.dtype), " and shape ", shape_str(e.shape), " need ", bytes, " bytes");
  return e;
}

std::map<std::string, std::string> parse_metadata(const std::string& path, const json::Value& v) {
  if (!v.is_object())
    fail(path, ": \"", kMetadataKey, "\": expected an object of string values, got a ", json::kind_name(v.kind()));
  std::map<std::string, std::string> out;
  for (const json::Member& m : v.as_object()) {
    if (!m.value.is_string())
      fail(path, ": \"", kMetadataKey, "\" entry '", m.key, "': expected a string value, got a ",
           json::kind_name(m.value.kind()));
    out[m.key] = m.value.as_string();
  }
  return out;
}

// Every tensor inside the buffer, no two sharing a byte.
void check_layout(const std::string& path, std::vector<HeaderEntry>& entries, uint64_t buffer_bytes) {
  for (const HeaderEntry& e : entries) {
    if (e.end > buffer_bytes)
      fail(path, ": tensor '", e.name, "': data_offsets [", e.begin, ", ", e.end, "] run past the end of the ",
           buffer_bytes, "-byte data buffer (file truncated, or offsets wrong)");
  }
  std::vector<const HeaderEntry*> by_start;
  for (const HeaderEntry& e : entries)
    if (e.end > e.begin) by_start.push_back(&e);
  std::sort(by_start.begin(), by_start.end(),
            [](const HeaderEntry* a, const HeaderEntry* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_start.size(); ++i) {
    const HeaderEntry& prev = *by_start[i - 1];
    const HeaderEntry& cur = *by_start[i];
    if (cur.begin < prev.end)
      fail(path, ": tensors '", prev.name, "' [", prev.begin, ", ", prev.end, ") and '", cur.name, "' [", cur.begin,
           ", ", cur.end, ") overlap; expected disjoint data_offsets");
  }
}

// ---------------------------------------------------------------- writing

// The bytes as they go to disk: CPU, logical NCHW order.
Tensor host_nchw(const Tensor& t) {
  Tensor h = t.device().is_cpu() ? t : t.to(Device::cpu());
  if (h.rank() == 4 && h.format() != MemoryFormat::NCHW) h = h.to_format(MemoryFormat::NCHW);
  return h;
}

}  // namespace

const char* safetensors_dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::U8: return "U8";
    case DType::I64: return "I64";
    case DType::F64: return "F64";
  }
  fail("safetensors: no name for dtype ", static_cast<int>(t));
}

DType safetensors_dtype_from_name(const std::string& name) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::U8, DType::I64, DType::F64})
    if (name == safetensors_dtype_name(t)) return t;
  fail("expected dtype F32, F16, BF16, U8, I64 or F64, got \"", name, "\"");
}

SafeTensorsFile load_safetensors(const std::string& path) {
  InputFile file(path);
  if (file.size() < kLengthPrefixBytes)
    fail(path, ": file is ", file.size(), " bytes; a safetensors file starts with an 8-byte header length");

  unsigned char prefix[kLengthPrefixBytes];
  file.read_at(0, prefix, kLengthPrefixBytes);
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | prefix[i];
  if (header_bytes > kSafetensorsMaxHeaderBytes || header_bytes > file.size() - kLengthPrefixBytes) {
    // Most often another kind of file: say which, and what to do with it.
    const std::string other = not_safetensors_message(path, sniff_file_kind(path));
    if (!other.empty()) fail(other);
  }
  if (header_bytes > kSafetensorsMaxHeaderBytes)
    fail(path, ": header length ", header_bytes, " exceeds the ", kSafetensorsMaxHeaderBytes,
         "-byte limit; expected a safetensors file");
  if (header_bytes > file.size() - kLengthPrefixBytes)
    fail(path, ": header length ", header_bytes, " is larger than the ", file.size() - kLengthPrefixBytes,
         " bytes that follow it; file truncated or not a safetensors file");

  std::string text(header_bytes, '\0');
  file.read_at(kLengthPrefixBytes, text.data(), header_bytes);
  json::Value header;
  try {
    header = json::parse(text);
  } catch (const Error& e) {
    fail(path, ": invalid JSON header: ", e.what());
  }
  if (!header.is_object())
    fail(path, ": expected the header to be a JSON object, got a ", json::kind_name(header.kind()));

  SafeTensorsFile out;
  std::vector<HeaderEntry> entries;
  for (const json::Member& m : header.as_object()) {
    if (m.key == kMetadataKey)
      out.metadata = parse_metadata(path, m.value);
    else
      entries.push_back(parse_entry(path, m.key, m.value));
  }
  const uint64_t data_start = kLengthPrefixBytes + header_bytes;
  check_layout(path, entries, file.size() - data_start);

  for (const HeaderEntry& e : entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    if (e.end > e.begin) file.read_at(data_start + e.begin, t.data(), e.end - e.begin);
    out.tensors.emplace(e.name, std::move(t));
  }
  return out;
}

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // Everything that can fail on bad arguments fails here, before any file is touched.
  json::Value header = json::Value::object();
  if (!metadata.empty()) {
    json::Value meta = json::Value::object();
    for (const auto& [key, value] : metadata) meta.append_member(key, json::Value::string(value));
    header.append_member(kMetadataKey, std::move(meta));
  }
  std::vector<Tensor> host;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {  // std::map: sorted by name
    if (name == kMetadataKey) fail("cannot write ", path, ": a tensor may not be named \"", kMetadataKey, "\"");
    if (!t.defined()) fail("cannot write ", path, ": tensor '", name, "' is undefined");
    host.push_back(host_nchw(t));
    const Tensor& h = host.back();
    json::Value shape = json::Value::array();
    for (int64_t d : h.shape()) shape.push_back(json::Value::integer(d));
    json::Value entry = json::Value::object();
    entry.append_member("dtype", json::Value::string(safetensors_dtype_name(h.dtype())));
    entry.append_member("shape", std::move(shape));
    entry.append_member("data_offsets",
                        json::Value::array({json::Value::integer(static_cast<int64_t>(offset)),
                                            json::Value::integer(static_cast<int64_t>(offset + h.nbytes()))}));
    header.append_member(name, std::move(entry));
    offset += h.nbytes();
  }
  std::string text = json::write(header);
  // Spaces up to a multiple of 8 keep the data buffer 8-byte aligned, as the reference writer does.
  text.append((8 - text.size() % 8) % 8, ' ');

  unsigned char prefix[kLengthPrefixBytes];
  for (size_t i = 0; i < kLengthPrefixBytes; ++i)
    prefix[i] = static_cast<unsigned char>(static_cast<uint64_t>(text.size()) >> (8 * i));

  AtomicFile out(path);
  out.write(prefix, sizeof prefix);
  out.write(text.data(), text.size());
  for (const Tensor& h : host)
    if (h.nbytes() > 0) out.write(h.data(), h.nbytes());
  out.commit();
}

}  // namespace ge
