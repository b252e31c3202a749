// One LMDB database read without liblmdb: its B-tree is walked once at open for the keys and
// where each value lies, every page checked against the file first. liblmdb trusts its file
// (a page size of 0, a file one page short or a page of the wrong kind crash it inside the
// library); a partly copied or corrupt LSUN download must end in an error naming the file.
// The LSUN releases are such databases: the main database only, key an image id, value the
// encoded image, no duplicate keys.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ge {

class ReadOnlyFile;

class LmdbReader {
 public:
  // Opens path (an LMDB directory holding data.mdb, or the data file itself) for reading; no
  // lock file is used or written, so read-only dataset copies work, and the database must not
  // be written while it is read (as torchvision's LSUN opens it: lock=False). Throws
  // ge::Error naming the file for a missing, truncated or corrupt database.
  explicit LmdbReader(const std::string& path);
  ~LmdbReader();
  LmdbReader(const LmdbReader&) = delete;
  LmdbReader& operator=(const LmdbReader&) = delete;

  const std::string& path() const { return path_; }
  int64_t size() const { return static_cast<int64_t>(key_offsets_.size()) - 1; }

  // Key i in the database's (sorted) order, and a printable form of it for messages.
  std::string key(int64_t i) const;
  std::string printable_key(int64_t i) const;

  // A copy of the value of key i: one or two reads at offsets checked at open, safe from any
  // thread. A value on overflow pages has that page's header checked first.
  std::vector<uint8_t> value(int64_t i) const;

 private:
  // Where a value lies: in a leaf page at `offset`, or on the overflow pages starting with
  // page `offset / page_size` (its data after the page header).
  struct ValueAt {
    int64_t offset = 0;
    uint32_t bytes = 0;
    bool overflow = false;
  };
  void read_tree(const std::string& data_path);

  std::string path_;
  std::unique_ptr<ReadOnlyFile> file_;
  int64_t page_size_ = 0;
  std::string keys_;                  // all keys, concatenated
  std::vector<int64_t> key_offsets_;  // key i is keys_[key_offsets_[i], key_offsets_[i + 1])
  std::vector<ValueAt> values_;
};

}  // namespace ge
