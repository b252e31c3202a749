// TFRecord files, the container TensorBoard's event files use: each record is
//   uint64 length, uint32 masked CRC-32C of those 8 bytes, the data, uint32 masked CRC-32C of the data
// (little-endian). Records are collected in memory and appended by flush() with one write(2)
// each time, so the file only ever holds whole records: a crash loses the unflushed tail, never
// leaves half a record that would stop a reader.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace ge {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), continuing from `crc` (0 to start).
uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);
// TFRecord's masked form: ((crc >> 15) | (crc << 17)) + 0xa282ead8, so that a CRC of data that
// itself holds CRCs does not degenerate.
uint32_t masked_crc32c(const void* data, size_t size);

// The framed bytes of one record.
std::string tfrecord_frame(const std::string& data);

class TfRecordWriter {
 public:
  // Creates (or truncates) path; throws ge::Error naming it when that is impossible.
  explicit TfRecordWriter(const std::string& path);
  ~TfRecordWriter();  // flushes what is pending, quietly
  TfRecordWriter(const TfRecordWriter&) = delete;
  TfRecordWriter& operator=(const TfRecordWriter&) = delete;

  void write(const std::string& data) { pending_ += tfrecord_frame(data); }
  // Appends the pending records; throws ge::Error naming the file on a write error.
  void flush();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string pending_;
  int fd_ = -1;
};

}  // namespace ge
