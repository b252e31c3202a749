// One LMDB database opened for reading only, with the list of its keys taken once at open:
// the LSUN releases are such databases (key: an image id, value: the encoded image).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

struct MDB_env;

namespace ge {

class LmdbReader {
 public:
  // Opens path (an LMDB directory holding data.mdb, or the data file itself) with
  // MDB_RDONLY | MDB_NOLOCK | MDB_NORDAHEAD, as torchvision's LSUN does (readonly, lock=False,
  // readahead=False): no lock file is written, so read-only dataset copies work, and the
  // database must not be written while it is read. Throws ge::Error naming path.
  explicit LmdbReader(const std::string& path);
  ~LmdbReader();
  LmdbReader(const LmdbReader&) = delete;
  LmdbReader& operator=(const LmdbReader&) = delete;

  const std::string& path() const { return path_; }
  int64_t size() const { return static_cast<int64_t>(key_offsets_.size()) - 1; }

  // Key i in LMDB's (sorted) order, and a printable form of it for messages.
  std::string key(int64_t i) const;
  std::string printable_key(int64_t i) const;

  // A copy of the value of key i, read in its own read-only transaction: safe from any thread.
  std::vector<uint8_t> value(int64_t i) const;

 private:
  std::string path_;
  MDB_env* env_ = nullptr;
  unsigned int dbi_ = 0;
  std::string keys_;                  // all keys, concatenated
  std::vector<int64_t> key_offsets_;  // key i is keys_[key_offsets_[i], key_offsets_[i + 1])
};

}  // namespace ge
