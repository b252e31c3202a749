// The protobuf wire-format encoder against encodings worked out by hand from the format's
// specification: varints, negative int64, fixed widths, floats, length-delimited and nested
// messages, packed repeated fields.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "io/protobuf_writer.h"

using ge::ProtobufWriter;

namespace {
std::vector<uint8_t> bytes(std::initializer_list<int> values) {
  std::vector<uint8_t> out;
  for (int v : values) out.push_back(static_cast<uint8_t>(v));
  return out;
}
}  // namespace

TEST_CASE("protobuf writer: varints take seven bits a byte with the low group first") {
  ProtobufWriter w;
  w.varint(1, 300);  // tag (1 << 3) | 0 = 08; 300 = 0b10_0101100 -> ac 02
  CHECK(w.data() == bytes({0x08, 0xac, 0x02}));

  ProtobufWriter small;
  small.varint(2, 1);
  small.varint(3, 0);
  small.varint(4, 127);
  small.varint(5, 128);
  CHECK(small.data() == bytes({0x10, 0x01, 0x18, 0x00, 0x20, 0x7f, 0x28, 0x80, 0x01}));

  ProtobufWriter max;
  max.varint(1, UINT64_MAX);
  CHECK(max.data() == bytes({0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}));
}

TEST_CASE("protobuf writer: a field number above 15 takes a two-byte tag") {
  ProtobufWriter w;
  w.varint(16, 1);    // (16 << 3) | 0 = 128 -> 80 01
  w.string(20, "a");  // (20 << 3) | 2 = 162 -> a2 01
  CHECK(w.data() == bytes({0x80, 0x01, 0x01, 0xa2, 0x01, 0x01, 'a'}));
}

TEST_CASE("protobuf writer: negative int64 takes ten bytes and booleans one") {
  ProtobufWriter w;
  w.int64(1, -1);
  CHECK(w.data() == bytes({0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}));
  CHECK(w.data().size() == 11);

  ProtobufWriter two;
  two.int64(1, -2);
  CHECK(two.data() == bytes({0x08, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}));

  ProtobufWriter flags;
  flags.boolean(7, true);
  flags.boolean(7, false);
  CHECK(flags.data() == bytes({0x38, 0x01, 0x38, 0x00}));
}

TEST_CASE("protobuf writer: fixed widths and floats are little-endian") {
  ProtobufWriter w;
  w.fixed32(1, 0x12345678u);
  w.fixed64(2, 0x0102030405060708ull);
  CHECK(w.data() == bytes({0x0d, 0x78, 0x56, 0x34, 0x12, 0x11, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01}));

  ProtobufWriter f;
  f.float32(1, 1.0f);  // 0x3f800000
  f.float64(2, -2.0);  // 0xc000000000000000
  CHECK(f.data() == bytes({0x0d, 0x00, 0x00, 0x80, 0x3f, 0x11, 0, 0, 0, 0, 0, 0, 0x00, 0xc0}));
}

TEST_CASE("protobuf writer: strings and bytes and nested messages carry their length") {
  ProtobufWriter w;
  w.string(2, "testing");  // the specification's own example: 12 07 74 65 73 74 69 6e 67
  CHECK(w.data() == bytes({0x12, 0x07, 't', 'e', 's', 't', 'i', 'n', 'g'}));

  ProtobufWriter empty;
  empty.bytes(3, nullptr, 0);
  CHECK(empty.data() == bytes({0x1a, 0x00}));

  // message Test3 { Test1 c = 3; } with Test1.a = 150: 1a 03 08 96 01.
  ProtobufWriter inner;
  inner.varint(1, 150);
  ProtobufWriter outer;
  outer.message(3, inner);
  CHECK(outer.data() == bytes({0x1a, 0x03, 0x08, 0x96, 0x01}));

  // Two levels deep, and a message longer than 127 bytes gets a two-byte length.
  ProtobufWriter middle;
  middle.message(1, outer);
  CHECK(middle.data() == bytes({0x0a, 0x05, 0x1a, 0x03, 0x08, 0x96, 0x01}));
  ProtobufWriter long_inner;
  long_inner.string(1, std::string(200, 'x'));  // 0a c8 01 + 200 bytes = 203 bytes
  ProtobufWriter long_outer;
  long_outer.message(2, long_inner);
  REQUIRE(long_outer.data().size() == 3 + 203);
  CHECK(long_outer.data()[0] == 0x12);
  CHECK(long_outer.data()[1] == 0xcb);  // 203 = 0b1_1001011 -> cb 01
  CHECK(long_outer.data()[2] == 0x01);
  CHECK(long_outer.str().substr(3, 3) == std::string("\x0a\xc8\x01"));
}

TEST_CASE("protobuf writer: packed repeated int64 is one length-delimited field") {
  ProtobufWriter w;
  w.packed_int64(4, {3, 270, 86942});  // the specification's example: 22 06 03 8e 02 9e a7 05
  CHECK(w.data() == bytes({0x22, 0x06, 0x03, 0x8e, 0x02, 0x9e, 0xa7, 0x05}));

  ProtobufWriter negative;
  negative.packed_int64(1, {-1});
  CHECK(negative.data().size() == 2 + 10);
  CHECK(negative.data()[1] == 10);
}
