// LmdbReader: a cursor walk at open for the key index, then one short read transaction per value.
// With MDB_NOLOCK there is no reader table, so a transaction costs a look at the meta pages and
// any number of threads may hold one at a time.
#include "data/lmdb_reader.h"

#include <lmdb.h>
#include <sys/stat.h>

#include <cctype>
#include <cstdio>

#include "ganengine/error.h"

namespace ge {
namespace {

// Ends a transaction however the scope is left.
struct ReadTxn {
  MDB_txn* txn = nullptr;
  ~ReadTxn() {
    if (txn) mdb_txn_abort(txn);
  }
};

}  // namespace

LmdbReader::LmdbReader(const std::string& path) : path_(path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail("cannot open LMDB database ", path, ": no such file or directory");
  int rc = mdb_env_create(&env_);
  if (rc != 0) fail("cannot open LMDB database ", path, ": ", mdb_strerror(rc));
  const unsigned flags =
      MDB_RDONLY | MDB_NOLOCK | MDB_NORDAHEAD | MDB_NOTLS | (S_ISDIR(st.st_mode) ? 0u : MDB_NOSUBDIR);
  rc = mdb_env_open(env_, path.c_str(), flags, 0444);
  if (rc != 0) {
    mdb_env_close(env_);
    env_ = nullptr;
    fail("cannot open LMDB database ", path, ": ", mdb_strerror(rc),
         S_ISDIR(st.st_mode) ? " (expected a directory holding an LMDB data.mdb)" : " (expected an LMDB data file)");
  }
  try {
    ReadTxn t;
    rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &t.txn);
    if (rc != 0) fail("cannot read LMDB database ", path, ": ", mdb_strerror(rc));
    MDB_dbi dbi = 0;
    rc = mdb_dbi_open(t.txn, nullptr, 0, &dbi);
    if (rc != 0) fail("cannot read LMDB database ", path, ": ", mdb_strerror(rc));
    dbi_ = dbi;

    MDB_cursor* cursor = nullptr;
    rc = mdb_cursor_open(t.txn, dbi, &cursor);
    if (rc != 0) fail("cannot read LMDB database ", path, ": ", mdb_strerror(rc));
    key_offsets_.push_back(0);
    MDB_val key{}, value{};
    for (rc = mdb_cursor_get(cursor, &key, &value, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)) {
      keys_.append(static_cast<const char*>(key.mv_data), key.mv_size);
      key_offsets_.push_back(static_cast<int64_t>(keys_.size()));
    }
    mdb_cursor_close(cursor);
    if (rc != MDB_NOTFOUND) fail("cannot list the keys of LMDB database ", path, ": ", mdb_strerror(rc));
    // The handle outlives this transaction only if it commits.
    rc = mdb_txn_commit(t.txn);
    t.txn = nullptr;
    if (rc != 0) fail("cannot read LMDB database ", path, ": ", mdb_strerror(rc));
  } catch (...) {
    mdb_env_close(env_);
    env_ = nullptr;
    throw;
  }
}

LmdbReader::~LmdbReader() {
  if (env_) mdb_env_close(env_);
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
  std::string k = key(i);
  ReadTxn t;
  int rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &t.txn);
  if (rc != 0) fail("cannot read LMDB database ", path_, ": ", mdb_strerror(rc));
  MDB_val key{k.size(), k.data()}, value{};
  rc = mdb_get(t.txn, dbi_, &key, &value);
  if (rc != 0) fail("cannot read key ", printable_key(i), " of LMDB database ", path_, ": ", mdb_strerror(rc));
  const auto* bytes = static_cast<const uint8_t*>(value.mv_data);
  return std::vector<uint8_t>(bytes, bytes + value.mv_size);
}

}  // namespace ge
