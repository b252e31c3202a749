// A protobuf wire-format encoder: the few field kinds that TensorBoard's Event records and ONNX's
// ModelProto need, written field by field in the order the caller gives. Nested messages are
// encoded into their own ProtobufWriter and added with message(), which prefixes their length.
// Wire format: https://protobuf.dev/programming-guides/encoding/ (little-endian fixed widths,
// base-128 varints, zig-zag only for sint types, which these schemas do not use).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace ge {

class ProtobufWriter {
 public:
  // Field numbers and wire types as .proto files give them.
  void varint(int field, uint64_t value) {
    tag(field, kVarint);
    raw_varint(value);
  }
  // int32/int64 fields: negative values take ten bytes, as the format requires.
  void int64(int field, int64_t value) { varint(field, static_cast<uint64_t>(value)); }
  void boolean(int field, bool value) { varint(field, value ? 1 : 0); }
  void fixed32(int field, uint32_t value) {
    tag(field, kFixed32);
    raw_fixed(value, 4);
  }
  void fixed64(int field, uint64_t value) {
    tag(field, kFixed64);
    raw_fixed(value, 8);
  }
  void float32(int field, float value) {
    uint32_t bits = 0;
    std::memcpy(&bits, &value, 4);
    fixed32(field, bits);
  }
  void float64(int field, double value) {
    uint64_t bits = 0;
    std::memcpy(&bits, &value, 8);
    fixed64(field, bits);
  }
  void bytes(int field, const void* data, size_t size) {
    tag(field, kLengthDelimited);
    raw_varint(size);
    const auto* p = static_cast<const uint8_t*>(data);
    out_.insert(out_.end(), p, p + size);
  }
  void string(int field, const std::string& s) { bytes(field, s.data(), s.size()); }
  void message(int field, const ProtobufWriter& nested) { bytes(field, nested.out_.data(), nested.out_.size()); }
  // A packed repeated int64 field (proto3's default for repeated scalars).
  void packed_int64(int field, const std::vector<int64_t>& values) {
    ProtobufWriter body;
    for (int64_t v : values) body.raw_varint(static_cast<uint64_t>(v));
    bytes(field, body.out_.data(), body.out_.size());
  }

  const std::vector<uint8_t>& data() const { return out_; }
  std::string str() const { return {out_.begin(), out_.end()}; }

 private:
  enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };
  void tag(int field, WireType type) { raw_varint((static_cast<uint64_t>(field) << 3) | type); }
  void raw_varint(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<uint8_t>(v | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<uint8_t>(v));
  }
  void raw_fixed(uint64_t v, int width) {
    for (int i = 0; i < width; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t> out_;
};

}  // namespace ge
