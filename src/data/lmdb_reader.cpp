// LmdbReader: LMDB's on-disk format (liblmdb 0.9, 64-bit little-endian builds) read with
// pread and checked at every step. A file is pages of page_size bytes; pages 0 and 1 are meta
// pages (the one with the larger transaction id is current) naming the main database's root
// page and depth; branch pages hold (key, child page) nodes, leaf pages (key, value) nodes
// with a value either inline or on a run of overflow pages. Every page number is checked to
// lie inside the file before it is read, every node inside its page, every page visited at
// most once and at the depth the meta page gives, so no file can make us read out of bounds
// or loop.
#include "data/lmdb_reader.h"

#include <sys/stat.h>

#include <cctype>
#include <cstdio>
#include <cstring>

#include "core/checked_size.h"
#include "data/read_only_file.h"
#include "ganengine/error.h"

namespace ge {
namespace {

constexpr uint32_t kMagic = 0xBEEFC0DE;
constexpr uint32_t kDataVersion = 1;
constexpr int64_t kPageHeaderBytes = 16;  // pgno u64, pad u16, flags u16, lower u16, upper u16
constexpr int64_t kNodeHeaderBytes = 8;   // lo u16, hi u16, flags u16, key size u16
constexpr int64_t kMetaEnd = kPageHeaderBytes + 136;
constexpr uint16_t kBranchPage = 0x01, kLeafPage = 0x02, kOverflowPage = 0x04, kMetaPage = 0x08, kLeaf2Page = 0x20;
constexpr uint16_t kBigData = 0x01;         // leaf node: the value is on overflow pages
constexpr uint64_t kNoRoot = ~uint64_t(0);  // an empty database
constexpr int kMaxDepth = 32;               // liblmdb's cursor stack depth
constexpr int64_t kMinPageSize = 512, kMaxPageSize = 32768;

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "LMDB files are read as written on little-endian hosts");

uint64_t le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

struct Meta {
  int64_t page_size = 0;
  uint16_t flags = 0;
  int depth = 0;
  uint64_t entries = 0;
  uint64_t root = kNoRoot;
  uint64_t last_page = 0;
  uint64_t txnid = 0;
};

}  // namespace

LmdbReader::LmdbReader(const std::string& path) : path_(path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail("cannot open LMDB database ", path, ": no such file or directory");
  const std::string data_path = S_ISDIR(st.st_mode) ? path + "/data.mdb" : path;
  try {
    file_ = std::make_unique<ReadOnlyFile>(data_path);
  } catch (const Error& e) {
    fail("cannot open LMDB database ", path, ": ", e.what(),
         S_ISDIR(st.st_mode) ? " (expected a directory holding an LMDB data.mdb)" : " (expected an LMDB data file)");
  }
  read_tree(data_path);
}

LmdbReader::~LmdbReader() = default;

void LmdbReader::read_tree(const std::string& data_path) {
  const int64_t file_bytes = file_->size();
  auto bad = [&](const auto&... parts) {
    fail("cannot open LMDB database ", data_path, ": ", parts...,
         " (expected an LMDB data file as LSUN releases it: is it corrupt, or only partly copied?)");
  };

  // The meta pages. Page 0's copy of the page size places page 1.
  auto read_meta = [&](int64_t offset, int which) {
    if (file_bytes - offset < kMetaEnd) bad(file_bytes, " bytes, too short for LMDB meta page ", which);
    uint8_t m[kMetaEnd];
    file_->read_at(offset, m, kMetaEnd);
    if (le(m + 16, 4) != kMagic) bad("meta page ", which, " has no LMDB magic number");
    if (le(m + 20, 4) != kDataVersion) bad("meta page ", which, " has LMDB format version ", le(m + 20, 4), ", not 1");
    if (!(le(m + 10, 2) & kMetaPage)) bad("meta page ", which, " is not marked as a meta page");
    Meta meta;
    meta.page_size = static_cast<int64_t>(le(m + 40, 4));
    meta.flags = static_cast<uint16_t>(le(m + 92, 2));
    meta.depth = static_cast<int>(le(m + 94, 2));
    meta.entries = le(m + 120, 8);
    meta.root = le(m + 128, 8);
    meta.last_page = le(m + 136, 8);
    meta.txnid = le(m + 144, 8);
    const int64_t ps = meta.page_size;
    if (ps < kMinPageSize || ps > kMaxPageSize || (ps & (ps - 1)) != 0)
      bad("meta page ", which, " gives a page size of ", ps, " bytes, expected a power of two from ", kMinPageSize,
          " to ", kMaxPageSize);
    return meta;
  };
  const Meta first = read_meta(0, 0);
  const Meta second = read_meta(first.page_size, 1);
  if (second.page_size != first.page_size)
    bad("the meta pages disagree on the page size (", first.page_size, " and ", second.page_size, ")");
  const Meta& meta = second.txnid > first.txnid ? second : first;
  page_size_ = meta.page_size;
  const int64_t pages_in_file = file_bytes / page_size_;
  if (meta.last_page >= uint64_t(INT64_MAX / page_size_) || int64_t(meta.last_page) >= pages_in_file)
    bad("the database uses pages 0 to ", meta.last_page, " of ", page_size_, " bytes but the file has ", file_bytes,
        " bytes (", pages_in_file, " whole pages)");
  if (meta.flags & 0x04) bad("the main database keeps duplicate values (MDB_DUPSORT), which LSUN databases never do");

  key_offsets_.assign(1, 0);
  if (meta.root == kNoRoot) {
    if (meta.entries != 0) bad("the meta page counts ", meta.entries, " entries but names no root page");
    return;
  }
  if (meta.depth < 1 || meta.depth > kMaxDepth) bad("the main database has a B-tree depth of ", meta.depth);

  // Depth-first over the tree in key order; pages are checked before they are followed.
  const int64_t usable_pages = int64_t(meta.last_page) + 1;
  std::vector<bool> visited(static_cast<size_t>(usable_pages), false);
  std::vector<uint8_t> page(static_cast<size_t>(page_size_));
  struct Pending {
    uint64_t pgno;
    int level;
  };
  std::vector<Pending> todo{{meta.root, 0}};
  while (!todo.empty()) {
    const Pending at = todo.back();
    todo.pop_back();
    if (at.pgno < 2 || at.pgno >= uint64_t(usable_pages))
      bad("a tree page number ", at.pgno, " outside the database's pages 2 to ", usable_pages - 1);
    if (visited[at.pgno]) bad("page ", at.pgno, " is reached twice in the B-tree");
    visited[at.pgno] = true;
    const int64_t page_offset = int64_t(at.pgno) * page_size_;
    file_->read_at(page_offset, page.data(), page_size_);
    const uint8_t* p = page.data();
    const bool want_leaf = at.level == meta.depth - 1;
    const uint16_t flags = static_cast<uint16_t>(le(p + 10, 2));
    const uint16_t kind = flags & (kBranchPage | kLeafPage | kOverflowPage | kMetaPage | kLeaf2Page);
    if (le(p, 8) != at.pgno) bad("page ", at.pgno, " carries the page number ", le(p, 8));
    if (kind != (want_leaf ? kLeafPage : kBranchPage))
      bad("page ", at.pgno, " at depth ", at.level, " of ", meta.depth, " has page flags 0x", std::hex, flags, std::dec,
          ", expected a ", want_leaf ? "leaf" : "branch", " page");
    const int64_t lower = static_cast<int64_t>(le(p + 12, 2)), upper = static_cast<int64_t>(le(p + 14, 2));
    if (lower < kPageHeaderBytes || lower > upper || upper > page_size_ || (lower - kPageHeaderBytes) % 2 != 0)
      bad("page ", at.pgno, " has free-space bounds ", lower, "..", upper, " outside its ", page_size_, " bytes");
    const int64_t nodes = (lower - kPageHeaderBytes) / 2;
    if (!want_leaf && nodes < 1) bad("branch page ", at.pgno, " has no children");
    std::vector<Pending> children;
    for (int64_t i = 0; i < nodes; ++i) {
      const int64_t node = static_cast<int64_t>(le(p + kPageHeaderBytes + 2 * i, 2));
      if (node < upper || node > page_size_ - kNodeHeaderBytes)
        bad("page ", at.pgno, " node ", i, " at byte ", node, " lies outside the page's node area");
      const uint8_t* n = p + node;
      const uint64_t lo_hi = le(n, 4);
      const uint16_t node_flags = static_cast<uint16_t>(le(n + 4, 2));
      const int64_t key_bytes = static_cast<int64_t>(le(n + 6, 2));
      const int64_t key_at = node + kNodeHeaderBytes;
      if (key_at + key_bytes > page_size_) bad("page ", at.pgno, " node ", i, " has a key running past the page");
      if (!want_leaf) {  // the child's page number: lo, hi, then the flags field as bits 32..47
        children.push_back({lo_hi | (uint64_t(node_flags) << 32), at.level + 1});
        continue;
      }
      if (node_flags & ~kBigData)
        bad("leaf page ", at.pgno, " node ", i, " has node flags 0x", std::hex, node_flags, std::dec,
            " (a sub-database or duplicate values, which LSUN databases never hold)");
      ValueAt value;
      value.bytes = static_cast<uint32_t>(lo_hi);
      if (node_flags & kBigData) {
        if (key_at + key_bytes + 8 > page_size_) bad("page ", at.pgno, " node ", i, " runs past the page");
        const uint64_t first_page = le(n + kNodeHeaderBytes + key_bytes, 8);
        if (first_page < 2 || first_page >= uint64_t(usable_pages) ||
            checked_add(int64_t(first_page) * page_size_, kPageHeaderBytes + int64_t(value.bytes),
                        "LMDB overflow value end") > file_bytes)
          bad("page ", at.pgno, " node ", i, " puts a value of ", value.bytes, " bytes on page ", first_page,
              ", beyond the end of the file (", file_bytes, " bytes)");
        value.offset = int64_t(first_page) * page_size_;
        value.overflow = true;
      } else {
        if (key_at + key_bytes + int64_t(value.bytes) > page_size_)
          bad("page ", at.pgno, " node ", i, " has a value of ", value.bytes, " bytes running past the page");
        value.offset = page_offset + key_at + key_bytes;
      }
      keys_.append(reinterpret_cast<const char*>(p + key_at), static_cast<size_t>(key_bytes));
      key_offsets_.push_back(static_cast<int64_t>(keys_.size()));
      values_.push_back(value);
    }
    // Pushed in reverse, so the leftmost child is read next and keys come in order.
    todo.insert(todo.end(), children.rbegin(), children.rend());
  }
  if (uint64_t(values_.size()) != meta.entries)
    bad("the B-tree holds ", values_.size(), " entries, the meta page counts ", meta.entries);
}

std::string LmdbReader::key(int64_t i) const {
  GE_CHECK(i >= 0 && i < size(), "LMDB key index ", i, " out of range [0, ", size(), ")");
  const auto begin = static_cast<size_t>(key_offsets_[size_t(i)]);
  return keys_.substr(begin, static_cast<size_t>(key_offsets_[size_t(i) + 1]) - begin);
}

std::string LmdbReader::printable_key(int64_t i) const {
  const std::string k = key(i);
  bool printable = !k.empty();
  for (unsigned char c : k) printable = printable && std::isprint(c) && c != '\'';
  if (printable) return "'" + k + "'";
  std::string hex = "0x";
  char byte[3];
  for (unsigned char c : k) {
    std::snprintf(byte, sizeof byte, "%02x", c);
    hex += byte;
  }
  return hex;
}

std::vector<uint8_t> LmdbReader::value(int64_t i) const {
  GE_CHECK(i >= 0 && i < size(), "LMDB value index ", i, " out of range [0, ", size(), ")");
  const ValueAt& at = values_[size_t(i)];
  std::vector<uint8_t> bytes(at.bytes);
  if (!at.overflow) {
    file_->read_at(at.offset, bytes.data(), at.bytes);
    return bytes;
  }
  uint8_t header[kPageHeaderBytes];
  file_->read_at(at.offset, header, kPageHeaderBytes);
  const uint64_t pgno = uint64_t(at.offset / page_size_);
  const int64_t pages = static_cast<int64_t>(le(header + 12, 4));
  if (le(header, 8) != pgno || !(le(header + 10, 2) & kOverflowPage) ||
      pages * page_size_ < kPageHeaderBytes + int64_t(at.bytes))
    fail("cannot read key ", printable_key(i), " of LMDB database ", path_, ": its value's overflow page ", pgno,
         " is corrupt (expected ", at.bytes, " bytes on overflow pages; is the file damaged?)");
  file_->read_at(at.offset + kPageHeaderBytes, bytes.data(), at.bytes);
  return bytes;
}

}  // namespace ge
