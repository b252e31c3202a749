// A minimal reader of ZIP archives held in memory, enough for the archives torch.save writes
// (entries stored uncompressed, padded to 64-byte alignment with an extra field) and for
// archives rezipped with deflate. The central directory is the index; each entry's local
// header is checked against it. Every offset and size is checked against the buffer before it
// is used, and an entry's bytes are checked against its CRC-32 when read.
// Not supported, with a clear error: ZIP64 (archives of 4 GiB and more), encryption, and
// compression methods other than stored (0) and deflate (8).
// Format: PKWARE's APPNOTE.TXT, sections 4.3.7 (local header), 4.3.12 (central directory
// header) and 4.3.16 (end of central directory record).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ge {

struct ZipEntry {
  std::string name;
  uint16_t method = 0;  // 0 stored, 8 deflate
  uint32_t crc32 = 0;
  uint64_t compressed_size = 0;
  uint64_t size = 0;
  uint64_t data_offset = 0;  // of the (compressed) bytes in the archive
};

class ZipArchive {
 public:
  // `bytes` must outlive the archive; `what` names it (a file name) in every error.
  ZipArchive(std::string_view bytes, std::string what);

  const std::vector<ZipEntry>& entries() const { return entries_; }
  // nullptr when there is no entry of that name.
  const ZipEntry* find(const std::string& name) const;
  // The entry's uncompressed bytes, CRC-checked. Throws ge::Error naming the archive and entry.
  std::string read(const ZipEntry& entry) const;

 private:
  std::string_view bytes_;
  std::string what_;
  std::vector<ZipEntry> entries_;
};

// Whether the bytes start like a ZIP archive (a local file header, or the end record of an
// empty archive).
bool looks_like_zip(std::string_view head);

}  // namespace ge
