// A reader of TensorBoard event files for the tests, written from the formats' specifications
// independently of the writer: TFRecord framing with both masked CRC-32C checks, and the Event,
// Summary, Value, Image and SessionLog fields the writer uses. tools/check_tensorboard.py reads
// the same files with TensorBoard's own reader.
#pragma once
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/tfrecord_writer.h"

namespace ge::test {

struct TbValue {
  std::string tag;
  bool has_simple_value = false;
  float simple_value = 0;
  bool has_image = false;
  int64_t height = 0, width = 0, colorspace = 0;
  std::string encoded_image;
};

struct TbEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  int64_t log_status = 0;  // SessionLog.status; 1 is START
  std::vector<TbValue> values;
};

class ProtoReader {
 public:
  explicit ProtoReader(const std::string& bytes) : s_(bytes) {}
  bool done() const { return at_ >= s_.size(); }
  // The next field's number and wire type.
  void next(int& field, int& wire) {
    const uint64_t key = varint();
    field = static_cast<int>(key >> 3);
    wire = static_cast<int>(key & 7);
  }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      if (at_ >= s_.size() || shift > 63) throw std::runtime_error("protobuf: truncated varint");
      const auto b = static_cast<uint8_t>(s_[at_++]);
      v |= uint64_t{b & 0x7fu} << shift;
      if (!(b & 0x80)) return v;
    }
  }
  uint64_t fixed(int bytes) {
    if (at_ + static_cast<size_t>(bytes) > s_.size()) throw std::runtime_error("protobuf: truncated fixed field");
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint64_t{static_cast<uint8_t>(s_[at_++])} << (8 * i);
    return v;
  }
  std::string bytes() {
    const uint64_t n = varint();
    if (at_ + n > s_.size()) throw std::runtime_error("protobuf: truncated length-delimited field");
    std::string out = s_.substr(at_, n);
    at_ += n;
    return out;
  }
  void skip(int wire) {
    if (wire == 0)
      varint();
    else if (wire == 1)
      fixed(8);
    else if (wire == 2)
      bytes();
    else if (wire == 5)
      fixed(4);
    else
      throw std::runtime_error("protobuf: unknown wire type " + std::to_string(wire));
  }

 private:
  const std::string& s_;
  size_t at_ = 0;
};

inline TbValue parse_tb_value(const std::string& bytes) {
  TbValue v;
  ProtoReader r(bytes);
  while (!r.done()) {
    int f, w;
    r.next(f, w);
    if (f == 1 && w == 2) {
      v.tag = r.bytes();
    } else if (f == 2 && w == 5) {
      const auto bits = static_cast<uint32_t>(r.fixed(4));
      std::memcpy(&v.simple_value, &bits, 4);
      v.has_simple_value = true;
    } else if (f == 4 && w == 2) {
      v.has_image = true;
      const std::string image = r.bytes();
      ProtoReader ir(image);
      while (!ir.done()) {
        int g, x;
        ir.next(g, x);
        if (g == 1 && x == 0)
          v.height = static_cast<int64_t>(ir.varint());
        else if (g == 2 && x == 0)
          v.width = static_cast<int64_t>(ir.varint());
        else if (g == 3 && x == 0)
          v.colorspace = static_cast<int64_t>(ir.varint());
        else if (g == 4 && x == 2)
          v.encoded_image = ir.bytes();
        else
          ir.skip(x);
      }
    } else {
      r.skip(w);
    }
  }
  return v;
}

inline TbEvent parse_tb_event(const std::string& bytes) {
  TbEvent e;
  ProtoReader r(bytes);
  while (!r.done()) {
    int f, w;
    r.next(f, w);
    if (f == 1 && w == 1) {
      const uint64_t bits = r.fixed(8);
      std::memcpy(&e.wall_time, &bits, 8);
    } else if (f == 2 && w == 0) {
      e.step = static_cast<int64_t>(r.varint());
    } else if (f == 3 && w == 2) {
      e.file_version = r.bytes();
    } else if (f == 5 && w == 2) {
      const std::string summary = r.bytes();
      ProtoReader sr(summary);
      while (!sr.done()) {
        int g, x;
        sr.next(g, x);
        if (g == 1 && x == 2)
          e.values.push_back(parse_tb_value(sr.bytes()));
        else
          sr.skip(x);
      }
    } else if (f == 6 && w == 2) {
      const std::string log = r.bytes();
      ProtoReader lr(log);
      while (!lr.done()) {
        int g, x;
        lr.next(g, x);
        if (g == 1 && x == 0)
          e.log_status = static_cast<int64_t>(lr.varint());
        else
          lr.skip(x);
      }
    } else {
      r.skip(w);
    }
  }
  return e;
}

inline uint64_t read_le(const std::string& s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{static_cast<uint8_t>(s[at + static_cast<size_t>(i)])} << (8 * i);
  return v;
}

// Every record of a TFRecord file's bytes; throws on a bad CRC or a truncated record.
inline std::vector<std::string> read_tfrecords(const std::string& file) {
  std::vector<std::string> records;
  size_t at = 0;
  while (at < file.size()) {
    if (at + 12 > file.size()) throw std::runtime_error("tfrecord: truncated header");
    const uint64_t n = read_le(file, at, 8);
    if (read_le(file, at + 8, 4) != masked_crc32c(file.data() + at, 8))
      throw std::runtime_error("tfrecord: bad length CRC");
    if (at + 12 + n + 4 > file.size()) throw std::runtime_error("tfrecord: truncated data");
    std::string data = file.substr(at + 12, n);
    if (read_le(file, at + 12 + n, 4) != masked_crc32c(data.data(), data.size()))
      throw std::runtime_error("tfrecord: bad data CRC");
    records.push_back(std::move(data));
    at += 12 + n + 4;
  }
  return records;
}

inline std::vector<TbEvent> read_tb_events(const std::string& file) {
  std::vector<TbEvent> events;
  for (const std::string& r : read_tfrecords(file)) events.push_back(parse_tb_event(r));
  return events;
}

}  // namespace ge::test
