// ZIP reading: the end of central directory record is searched for from the end (it may be
// followed by a comment of up to 65535 bytes), then every central directory header is read in
// order and its local header located and checked.
#include "io/zip_reader.h"

#include <zlib.h>

#include <algorithm>
#include <limits>

#include "ganengine/error.h"

namespace ge {
namespace {

constexpr uint32_t kLocalHeaderSignature = 0x04034b50;
constexpr uint32_t kCentralHeaderSignature = 0x02014b50;
constexpr uint32_t kEndRecordSignature = 0x06054b50;
constexpr size_t kLocalHeaderBytes = 30;
constexpr size_t kCentralHeaderBytes = 46;
constexpr size_t kEndRecordBytes = 22;
constexpr size_t kMaxCommentBytes = 65535;
constexpr uint16_t kMethodStored = 0;
constexpr uint16_t kMethodDeflate = 8;
constexpr uint16_t kFlagEncrypted = 1;

// Little-endian fields at an offset the caller has bounds-checked.
uint16_t le16(std::string_view b, size_t at) {
  return static_cast<uint16_t>(static_cast<uint8_t>(b[at]) | (static_cast<uint8_t>(b[at + 1]) << 8));
}
uint32_t le32(std::string_view b, size_t at) {
  return static_cast<uint32_t>(le16(b, at)) | (static_cast<uint32_t>(le16(b, at + 2)) << 16);
}

// Whether [offset, offset + bytes) lies inside a buffer of `size` bytes, without overflow.
bool fits(uint64_t offset, uint64_t bytes, uint64_t size) { return offset <= size && bytes <= size - offset; }

}  // namespace

bool looks_like_zip(std::string_view head) {
  return head.size() >= 4 && (le32(head, 0) == kLocalHeaderSignature || le32(head, 0) == kEndRecordSignature);
}

ZipArchive::ZipArchive(std::string_view bytes, std::string what) : bytes_(bytes), what_(std::move(what)) {
  const size_t n = bytes_.size();
  if (n < kEndRecordBytes) fail(what_, ": ", n, " bytes is too short for a ZIP archive (truncated?)");
  size_t end_record = std::string_view::npos;
  const size_t lowest = n - kEndRecordBytes > kMaxCommentBytes ? n - kEndRecordBytes - kMaxCommentBytes : 0;
  for (size_t at = n - kEndRecordBytes + 1; at-- > lowest;) {
    if (le32(bytes_, at) == kEndRecordSignature && at + kEndRecordBytes + le16(bytes_, at + 20) == n) {
      end_record = at;
      break;
    }
  }
  if (end_record == std::string_view::npos)
    fail(what_, ": no ZIP end of central directory record (the file is truncated or not a ZIP archive)");

  const uint16_t disk = le16(bytes_, end_record + 4);
  const uint16_t count = le16(bytes_, end_record + 10);
  const uint32_t directory_bytes = le32(bytes_, end_record + 12);
  const uint32_t directory_offset = le32(bytes_, end_record + 16);
  if (count == 0xffff || directory_bytes == 0xffffffffu || directory_offset == 0xffffffffu)
    fail(what_, ": a ZIP64 archive (4 GiB or more, or 65535 entries); only plain ZIP archives are read");
  if (disk != 0) fail(what_, ": a multi-part ZIP archive; expected one file");
  if (!fits(directory_offset, directory_bytes, end_record))
    fail(what_, ": the ZIP central directory [", directory_offset, ", +", directory_bytes,
         ") lies outside the file (truncated?)");

  size_t at = directory_offset;
  const size_t directory_end = static_cast<size_t>(directory_offset) + directory_bytes;
  for (uint16_t i = 0; i < count; ++i) {
    if (!fits(at, kCentralHeaderBytes, directory_end) || le32(bytes_, at) != kCentralHeaderSignature)
      fail(what_, ": ZIP central directory entry ", i, " of ", count, " is missing or corrupt");
    ZipEntry e;
    const uint16_t flags = le16(bytes_, at + 8);
    e.method = le16(bytes_, at + 10);
    e.crc32 = le32(bytes_, at + 16);
    e.compressed_size = le32(bytes_, at + 20);
    e.size = le32(bytes_, at + 24);
    const uint16_t name_bytes = le16(bytes_, at + 28);
    const uint16_t extra_bytes = le16(bytes_, at + 30);
    const uint16_t comment_bytes = le16(bytes_, at + 32);
    const uint32_t local_offset = le32(bytes_, at + 42);
    const uint64_t header_bytes = uint64_t{kCentralHeaderBytes} + name_bytes + extra_bytes + comment_bytes;
    if (!fits(at, header_bytes, directory_end))
      fail(what_, ": ZIP central directory entry ", i, " runs past the directory's end");
    e.name.assign(bytes_.substr(at + kCentralHeaderBytes, name_bytes));
    at += header_bytes;

    if (flags & kFlagEncrypted) fail(what_, ": ZIP entry '", e.name, "' is encrypted");
    if (e.method != kMethodStored && e.method != kMethodDeflate)
      fail(what_, ": ZIP entry '", e.name, "' uses compression method ", e.method,
           "; expected stored (0) or deflate (8)");
    if (e.compressed_size == 0xffffffffu || e.size == 0xffffffffu || local_offset == 0xffffffffu)
      fail(what_, ": ZIP entry '", e.name, "' needs ZIP64 (4 GiB or more); only plain ZIP archives are read");
    if (e.method == kMethodStored && e.compressed_size != e.size)
      fail(what_, ": ZIP entry '", e.name, "' is stored but its sizes differ (", e.compressed_size, " and ", e.size,
           ")");
    if (!fits(local_offset, kLocalHeaderBytes, n) || le32(bytes_, local_offset) != kLocalHeaderSignature)
      fail(what_, ": ZIP entry '", e.name, "': no local header at byte ", local_offset, " (corrupt or truncated)");
    const uint64_t data_offset =
        uint64_t{local_offset} + kLocalHeaderBytes + le16(bytes_, local_offset + 26) + le16(bytes_, local_offset + 28);
    if (!fits(data_offset, e.compressed_size, directory_offset))
      fail(what_, ": ZIP entry '", e.name, "': its ", e.compressed_size, " bytes at byte ", data_offset,
           " run past the file's data (truncated?)");
    e.data_offset = data_offset;
    entries_.push_back(std::move(e));
  }
}

const ZipEntry* ZipArchive::find(const std::string& name) const {
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const ZipEntry& e) { return e.name == name; });
  return it == entries_.end() ? nullptr : &*it;
}

std::string ZipArchive::read(const ZipEntry& e) const {
  const std::string_view packed = bytes_.substr(e.data_offset, e.compressed_size);
  std::string out;
  if (e.method == kMethodStored) {
    out.assign(packed);
  } else {
    // A deflated entry can grow at most ~1032-fold; a larger claim is a corrupt header, and
    // must not make us allocate it.
    if (e.size / 1032 > e.compressed_size + 1)
      fail(what_, ": ZIP entry '", e.name, "' claims ", e.size, " bytes from ", e.compressed_size, " compressed");
    out.resize(e.size);
    z_stream z{};
    if (inflateInit2(&z, -MAX_WBITS) != Z_OK) fail(what_, ": zlib cannot start inflating '", e.name, "'");
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(packed.data()));
    z.avail_in = static_cast<uInt>(packed.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    const int rc = inflate(&z, Z_FINISH);
    const uint64_t produced = z.total_out;
    inflateEnd(&z);
    if (rc != Z_STREAM_END || produced != e.size)
      fail(what_, ": ZIP entry '", e.name, "' does not inflate to its ", e.size, " bytes (corrupt)");
  }
  const uLong crc =
      crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(out.data()), static_cast<uInt>(out.size()));
  if (crc != e.crc32) fail(what_, ": ZIP entry '", e.name, "' fails its CRC-32 check (corrupt)");
  return out;
}

}  // namespace ge
