// safetensors: round trips, byte compatibility with the reference (Python/Rust) writer,
// a clear error for every kind of corrupt file, and atomic replacement on save.
#include <cstring>
#include <filesystem>

#include "ganengine/safetensors.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

namespace fs = std::filesystem;
using namespace ge;

namespace {

using test::read_file_bytes;
using test::TempDir;
using test::write_file_bytes;

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// The layout the reference writer produces: length prefix, JSON padded with spaces to a
// multiple of 8, data.
std::string safetensors_bytes(std::string header, const std::string& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  return le64(header.size()) + header + data;
}

std::string float_bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

std::string tensor_bytes(const Tensor& t) {
  return t.nbytes() ? std::string(static_cast<const char*>(t.data()), t.nbytes()) : std::string();
}

// A CPU tensor whose bytes follow a fixed pattern (any dtype, including u8 and i64).
Tensor patterned(const Shape& shape, DType dtype, int salt) {
  Tensor t = Tensor::empty(shape, dtype);
  auto* p = static_cast<unsigned char*>(t.data());
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<unsigned char>(i * 37 + salt * 11 + 5);
  return t;
}

// Loading path must throw ge::Error whose message names the file and contains `expect`.
void check_rejected(const std::string& path, const std::string& expect) {
  CAPTURE(path);
  CAPTURE(expect);
  try {
    load_safetensors(path);
    FAIL("load_safetensors accepted a corrupt file");
  } catch (const Error& e) {
    const std::string msg = e.what();
    CAPTURE(msg);
    CHECK(msg.find(path) != std::string::npos);
    CHECK(msg.find(expect) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("safetensors: round trip of every dtype with metadata scalar and empty shapes") {
  TempDir tmp;
  std::map<std::string, Tensor> tensors;
  const std::vector<DType> dtypes = {DType::F32, DType::F16, DType::BF16, DType::U8, DType::I64, DType::F64};
  const std::vector<Shape> shapes = {{2, 3}, {}, {0}, {2, 0, 3}, {1, 2, 3, 4}, {7}};
  int salt = 0;
  for (DType d : dtypes)
    for (const Shape& s : shapes) {
      const int k = salt++;
      tensors["t_" + std::string(dtype_name(d)) + "_" + std::to_string(k)] = patterned(s, d, k);
    }
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"note", "quote \" backslash \\ newline \n tab \t unicode \xc3\xa9"}, {"", "empty key"}};
  const std::string path = tmp.file("all.safetensors");
  save_safetensors(path, tensors, metadata);

  const SafeTensorsFile f = load_safetensors(path);
  CHECK(f.metadata == metadata);
  REQUIRE(f.tensors.size() == tensors.size());
  for (const auto& entry : tensors) {
    const std::string& name = entry.first;
    const Tensor& t = entry.second;
    CAPTURE(name);
    REQUIRE(f.tensors.count(name) == 1);
    const Tensor& r = f.tensors.at(name);
    CHECK(r.dtype() == t.dtype());
    CHECK(r.shape() == t.shape());
    CHECK(r.device().is_cpu());
    CHECK(tensor_bytes(r) == tensor_bytes(t));
  }
  // The data buffer starts 8-byte aligned.
  const std::string bytes = read_file_bytes(path);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i)
    header_len = (header_len << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  CHECK(header_len % 8 == 0);
}

TEST_CASE("safetensors: NHWC tensors are written as logical NCHW") {
  TempDir tmp;
  const Shape shape = {2, 3, 4, 5};
  std::vector<float> values(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f - 7.f;
  const Tensor nhwc = Tensor::from_floats(values, shape, DType::F32, Device::cpu(), MemoryFormat::NHWC);
  const std::string path = tmp.file("nhwc.safetensors");
  save_safetensors(path, {{"x", nhwc}});
  const Tensor back = load_safetensors(path).tensors.at("x");
  CHECK(back.format() == MemoryFormat::NCHW);
  CHECK(back.to_floats() == values);
  CHECK(tensor_bytes(back) == float_bytes(values));
}

TEST_CASE("safetensors: byte layout of the reference writer") {
  TempDir tmp;
  // What safetensors.torch.save_file({"a": ..., "b": ...}, metadata={"format": "pt"}) writes for
  // two f32 tensors: compact JSON, metadata first, entries in data order, space padding.
  const std::vector<float> a = {1.f, -2.f}, b = {0.25f, 3.5f};
  const std::string header = R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"F32","shape":[1,2],"data_offsets":[8,16]}})";
  const std::string expected = safetensors_bytes(header, float_bytes(a) + float_bytes(b));
  REQUIRE(header.size() == 141);  // so 3 spaces of padding make it 144 = 0x90
  CHECK(expected.substr(0, 8) == std::string("\x90\0\0\0\0\0\0\0", 8));

  const std::string reference = tmp.file("reference.safetensors");
  write_file_bytes(reference, expected);
  const SafeTensorsFile f = load_safetensors(reference);
  CHECK(f.metadata == std::map<std::string, std::string>{{"format", "pt"}});
  CHECK(f.tensors.at("a").shape() == Shape{2});
  CHECK(f.tensors.at("b").shape() == Shape{1, 2});
  CHECK(f.tensors.at("a").to_floats() == a);
  CHECK(f.tensors.at("b").to_floats() == b);

  // Our writer produces exactly these bytes.
  const std::string ours = tmp.file("ours.safetensors");
  save_safetensors(ours,
                   {{"a", Tensor::from_floats(a, {2}, DType::F32)}, {"b", Tensor::from_floats(b, {1, 2}, DType::F32)}},
                   {{"format", "pt"}});
  CHECK(read_file_bytes(ours) == expected);
}

TEST_CASE("safetensors: reads entries in any order with data ordered by alignment") {
  TempDir tmp;
  // The reference writer puts wider dtypes first in the buffer, so offsets need not follow names.
  const std::vector<float> w = {1.5f, 2.5f};
  const std::string half_one("\x00\x3c", 2);  // f16 1.0
  const std::string header =
      R"({"h":{"dtype":"F16","shape":[1],"data_offsets":[8,10]},  "w" : {"shape":[2],"dtype":"F32","data_offsets":[0,8]}})";
  const std::string path = tmp.file("mixed.safetensors");
  write_file_bytes(path, safetensors_bytes(header, float_bytes(w) + half_one));
  const SafeTensorsFile f = load_safetensors(path);
  CHECK(f.metadata.empty());
  CHECK(f.tensors.at("w").to_floats() == w);
  CHECK(f.tensors.at("h").dtype() == DType::F16);
  CHECK(f.tensors.at("h").item() == 1.0);
}

TEST_CASE("safetensors: every corruption gives an error naming the file") {
  TempDir tmp;
  auto file_with = [&](const std::string& name, const std::string& bytes) {
    std::string path = tmp.file(name);
    write_file_bytes(path, bytes);
    return path;
  };
  const std::string eight_floats = float_bytes({1, 2, 3, 4, 5, 6, 7, 8});

  check_rejected(tmp.file("missing.safetensors"), "cannot open");
  check_rejected(file_with("short.safetensors", "abcde"), "8-byte header length");
  check_rejected(file_with("empty.safetensors", ""), "8-byte header length");
  check_rejected(file_with("long_header.safetensors", le64(64) + "{}"), "larger than");
  check_rejected(file_with("huge_header.safetensors", le64(200'000'000) + std::string(16, ' ')), "limit");
  check_rejected(file_with("absurd_header.safetensors", le64(~0ull) + "{}"), "limit");
  check_rejected(file_with("bad_json.safetensors", safetensors_bytes(R"({"a": [1, 2})", "")), "invalid JSON");
  check_rejected(file_with("not_json.safetensors", safetensors_bytes("PK\x03\x04", "")), "invalid JSON");
  check_rejected(file_with("array_header.safetensors", safetensors_bytes("[1,2]", "")), "JSON object");
  check_rejected(
      file_with(
          "dup_key.safetensors",
          safetensors_bytes(
              R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
              eight_floats)),
      "appears twice");
  check_rejected(
      file_with("dtype.safetensors",
                safetensors_bytes(R"({"a":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})", eight_floats)),
      "expected dtype F32, F16, BF16, U8, I64 or F64, got \"I32\"");
  check_rejected(
      file_with("no_dtype.safetensors", safetensors_bytes(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", eight_floats)),
      "\"dtype\"");
  check_rejected(
      file_with("mismatch.safetensors",
                safetensors_bytes(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight_floats)),
      "need 12 bytes");
  check_rejected(
      file_with("reversed.safetensors",
                safetensors_bytes(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", eight_floats)),
      "end before they begin");
  check_rejected(
      file_with("out_of_buffer.safetensors",
                safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[32,40]}})", eight_floats)),
      "run past the end");
  check_rejected(
      file_with("overlap.safetensors", safetensors_bytes(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                                                         R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                                                         eight_floats)),
      "overlap");
  check_rejected(
      file_with("negative_dim.safetensors",
                safetensors_bytes(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight_floats)),
      "non-negative");
  check_rejected(
      file_with("fractional_dim.safetensors",
                safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", eight_floats)),
      "non-negative integer");
  check_rejected(
      file_with("negative_offset.safetensors",
                safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", eight_floats)),
      "non-negative");
  check_rejected(
      file_with("huge_shape.safetensors",
                safetensors_bytes(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
                                  eight_floats)),
      "64 bits");
  check_rejected(file_with("metadata.safetensors", safetensors_bytes(R"({"__metadata__":{"epoch":3}})", "")),
                 "expected a string value");

  // A good file cut short: the last tensor's bytes are missing.
  const std::string good = tmp.file("good.safetensors");
  save_safetensors(good, {{"w", patterned({64}, DType::F32, 1)}});
  const std::string bytes = read_file_bytes(good);
  check_rejected(file_with("truncated.safetensors", bytes.substr(0, bytes.size() - 3)), "run past the end");
  check_rejected(file_with("truncated_header.safetensors", bytes.substr(0, 20)), "larger than");
}

TEST_CASE("safetensors: saving is atomic") {
  TempDir tmp;
  const std::map<std::string, Tensor> small = {{"s", patterned({3}, DType::F32, 2)}};

  SUBCASE("a missing directory fails clearly and creates nothing") {
    const std::string path = tmp.file("no_such_dir/out.safetensors");
    try {
      save_safetensors(path, small);
      FAIL("save into a missing directory succeeded");
    } catch (const Error& e) {
      const std::string msg = e.what();
      CAPTURE(msg);
      CHECK(msg.find(path) != std::string::npos);
      CHECK(msg.find("No such file or directory") != std::string::npos);
    }
    CHECK(tmp.entries().empty());
  }

  SUBCASE("an existing file is replaced whole") {
    const std::string path = tmp.file("model.safetensors");
    save_safetensors(path, {{"big", patterned({1 << 16}, DType::F32, 3)}, {"other", patterned({5}, DType::U8, 4)}},
                     {{"epoch", "1"}});
    const size_t big_size = fs::file_size(path);
    save_safetensors(path, small, {{"epoch", "2"}});
    CHECK(fs::file_size(path) < big_size);
    const SafeTensorsFile f = load_safetensors(path);
    CHECK(f.tensors.size() == 1);
    CHECK(tensor_bytes(f.tensors.at("s")) == tensor_bytes(small.at("s")));
    CHECK(f.metadata.at("epoch") == "2");
    CHECK(tmp.entries() == std::vector<std::string>{"model.safetensors"});
  }

  SUBCASE("a failed save leaves the existing file untouched and no temporary") {
    const std::string path = tmp.file("keep.safetensors");
    save_safetensors(path, small);
    const std::string before = read_file_bytes(path);
    CHECK_THROWS_AS(save_safetensors(path, {{"undefined", Tensor()}}), Error);
    CHECK_THROWS_AS(save_safetensors(path, {{"__metadata__", small.at("s")}}), Error);
    CHECK(read_file_bytes(path) == before);
    CHECK(tmp.entries() == std::vector<std::string>{"keep.safetensors"});

    // The rename itself fails when the target is a directory: the temporary must still go.
    const std::string dir_path = tmp.file("a_directory");
    fs::create_directory(dir_path);
    try {
      save_safetensors(dir_path, small);
      FAIL("save over a directory succeeded");
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find(dir_path) != std::string::npos);
    }
    CHECK(fs::is_directory(dir_path));
    CHECK(tmp.entries().size() == 2);
  }
}

TEST_CASE("safetensors: GPU tensors are saved as CPU bytes") {
  GE_REQUIRE_GPU();
  TempDir tmp;
  const Tensor cpu = test::random_tensor({2, 3, 4, 5}, DType::F16, Device::cpu(), MemoryFormat::NCHW);
  const Tensor gpu = cpu.to(Device::cuda()).to_format(MemoryFormat::NHWC);
  const std::string path = tmp.file("gpu.safetensors");
  save_safetensors(path, {{"x", gpu}});
  CHECK(tensor_bytes(load_safetensors(path).tensors.at("x")) == tensor_bytes(cpu));
}
