// A dataset decoded once and kept on disk: large folder and LSUN datasets spend most of a
// training epoch decoding and resizing images; the cache pays that once, and later runs read
// raw pixels from a memory-mapped file.
//
// The file is <cache_dir>/<name>-<image_size>px-<hash16>.gecache, hash16 being the first 16
// hex digits of the MD5 of the source's fingerprint(): a changed source (or image size) has
// another file name, so caches of two versions or sizes of a dataset live side by side.
// Layout, integers little-endian:
//   "GECACHE1"  u32 version  u32 header_bytes  u64 count  u32 image_size  u32 channels
//   char[32] fingerprint MD5 (hex)  u32 name_length  name  char[32] MD5 (hex) of the bytes before
//   then count images of image_size x image_size x channels u8, HWC, back to back,
//   then count u32 CRC-32s, one per image: a read checks its image's, so a damaged byte in
//   the pixels is an error naming the file and the image, never silently trained on.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "ganengine/data.h"

namespace ge {

class CachedDataset : public Dataset {
 public:
  // Opens the cache of `source` in cache_dir, or builds it first: every image is read once
  // from source on `workers` threads (0 or 1: the calling thread), streamed into the file,
  // which appears atomically when complete. An existing file that is truncated, corrupt or
  // from another source is rebuilt with a one-line notice on stderr naming it and why.
  // Throws ge::Error naming cache_dir or the file when cache_dir is not a directory, cannot
  // be created or written, lacks the space, or the file cannot be read; and passes on the
  // source's errors (a file that does not decode) with nothing left behind.
  CachedDataset(std::unique_ptr<Dataset> source, const std::string& cache_dir, int workers);
  ~CachedDataset() override;
  CachedDataset(const CachedDataset&) = delete;
  CachedDataset& operator=(const CachedDataset&) = delete;

  int64_t size() const override { return source_->size(); }
  int channels() const override { return source_->channels(); }
  int image_size() const override { return source_->image_size(); }
  std::string name() const override { return source_->name(); }
  std::string fingerprint() const override { return fingerprint_; }
  // A copy out of the mapping, its checksum checked (ge::Error naming the file and the image
  // when it does not match): never touches the source, safe from any number of threads.
  void read(int64_t index, uint8_t* hwc_out) const override;

  const std::string& path() const { return path_; }
  // The dataset the cache holds the images of (what it skipped, for --skip-bad-images).
  const Dataset& source() const { return *source_; }
  // Whether this open used an existing file as it was (false: it decoded the source).
  bool reused() const { return rebuild_reason_.empty(); }
  // Why the source was decoded: "missing", "source changed", "truncated", "corrupt header", ...
  const std::string& rebuild_reason() const { return rebuild_reason_; }

  // The file name for a source: <name>-<image_size>px-<hash16>.gecache (characters of name
  // outside [A-Za-z0-9._-] become '_').
  static std::string file_name(const std::string& name, int image_size, const std::string& fingerprint);

 private:
  struct Mapping;

  std::unique_ptr<Dataset> source_;
  std::string fingerprint_;
  std::string path_;
  std::string rebuild_reason_;
  std::unique_ptr<Mapping> mapping_;
};

}  // namespace ge
