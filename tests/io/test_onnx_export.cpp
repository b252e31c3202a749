// The ONNX generator graph, decoded field by field with a small protobuf reader written from
// the wire format and onnx.proto's field numbers: model header, operator set, nodes in order
// with their attributes, the symbolic batch dimension, and initializers holding the weights'
// exact bytes. (onnxruntime runs the exported model in tools/check_onnx_ci.sh.)
#include <cstring>
#include <string>
#include <vector>

#include "ganengine/state_dict.h"
#include "io/onnx_generator.h"
#include "support/test_util.h"

using namespace ge;

namespace {

struct Field {
  int number = 0;
  int wire = 0;
  uint64_t value = 0;  // varint and fixed fields
  std::string bytes;   // length-delimited fields
};

uint64_t read_varint(const std::string& s, size_t& at) {
  uint64_t v = 0;
  for (int shift = 0;; shift += 7) {
    REQUIRE(at < s.size());
    const auto byte = static_cast<uint8_t>(s[at++]);
    v |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80)) return v;
  }
}

std::vector<Field> parse(const std::string& s) {
  std::vector<Field> out;
  size_t at = 0;
  while (at < s.size()) {
    const uint64_t tag = read_varint(s, at);
    Field f;
    f.number = static_cast<int>(tag >> 3);
    f.wire = static_cast<int>(tag & 7);
    if (f.wire == 0) {
      f.value = read_varint(s, at);
    } else if (f.wire == 2) {
      const uint64_t n = read_varint(s, at);
      REQUIRE(n <= s.size() - at);
      f.bytes = s.substr(at, n);
      at += n;
    } else if (f.wire == 5 || f.wire == 1) {
      const size_t width = f.wire == 5 ? 4 : 8;
      REQUIRE(width <= s.size() - at);
      for (size_t i = width; i-- > 0;) f.value = (f.value << 8) | static_cast<uint8_t>(s[at + i]);
      at += width;
    } else {
      FAIL("wire type ", f.wire);
    }
    out.push_back(f);
  }
  return out;
}

std::vector<Field> fields(const std::vector<Field>& all, int number) {
  std::vector<Field> out;
  for (const Field& f : all)
    if (f.number == number) out.push_back(f);
  return out;
}

const Field& one(const std::vector<Field>& all, int number) {
  static std::vector<Field> kept;
  kept = fields(all, number);
  REQUIRE(kept.size() == 1);
  return kept[0];
}

// A ValueInfoProto's name and dims ("N" for a dim_param, else the number).
std::pair<std::string, std::vector<std::string>> value_info(const std::string& bytes) {
  const auto v = parse(bytes);
  std::vector<std::string> dims;
  const auto type = parse(one(v, 2).bytes);
  const auto tensor = parse(one(type, 1).bytes);
  CHECK(one(tensor, 1).value == 1);  // elem_type FLOAT
  for (const Field& d : fields(parse(one(tensor, 2).bytes), 1)) {
    const auto dim = parse(d.bytes);
    dims.push_back(dim[0].number == 2 ? dim[0].bytes : std::to_string(dim[0].value));
  }
  return {one(v, 1).bytes, dims};
}

}  // namespace

TEST_CASE("onnx export: the generator graph of a .pth golden field by field") {
  const std::string path = test::data_path("pth_netG_nc1.pth");
  const nn::StateDict sd = nn::load_state_dict_file(path);
  const nn::NetConfig cfg = nn::infer_generator_config(sd, path);
  const auto model = parse(onnx::encode_model(onnx::generator_graph(sd, cfg, path), 17, "test"));

  CHECK(one(model, 1).value == 8);  // ir_version
  CHECK(one(model, 2).bytes == "ganengine");
  const auto opset = parse(one(model, 8).bytes);
  CHECK(one(opset, 1).bytes.empty());  // the default domain
  CHECK(one(opset, 2).value == 17);

  const auto graph = parse(one(model, 7).bytes);
  std::vector<std::string> ops;
  std::vector<std::vector<Field>> nodes;
  for (const Field& n : fields(graph, 1)) {
    nodes.push_back(parse(n.bytes));
    ops.push_back(one(nodes.back(), 4).bytes);
  }
  CHECK(ops == std::vector<std::string>{"ConvTranspose", "BatchNormalization", "Relu", "ConvTranspose",
                                        "BatchNormalization", "Relu", "ConvTranspose", "Tanh"});
  // Each node reads the previous one's output; the first reads z, the last writes image.
  CHECK(fields(nodes[0], 1)[0].bytes == "z");
  for (size_t i = 1; i < nodes.size(); ++i) CHECK(fields(nodes[i], 1)[0].bytes == one(nodes[i - 1], 2).bytes);
  CHECK(one(nodes.back(), 2).bytes == "image");

  // ConvTranspose attributes: the first block stride 1, no padding; the others stride 2, padding 1.
  auto ints_of = [](const std::vector<Field>& node, const std::string& name) {
    for (const Field& a : fields(node, 5)) {
      const auto attr = parse(a.bytes);
      if (one(attr, 1).bytes != name) continue;
      CHECK(one(attr, 20).value == 7);  // INTS
      std::vector<int64_t> v;
      for (const Field& i : fields(attr, 8)) v.push_back(static_cast<int64_t>(i.value));
      return v;
    }
    return std::vector<int64_t>{};
  };
  CHECK(ints_of(nodes[0], "kernel_shape") == std::vector<int64_t>{4, 4});
  CHECK(ints_of(nodes[0], "strides") == std::vector<int64_t>{1, 1});
  CHECK(ints_of(nodes[0], "pads") == std::vector<int64_t>{0, 0, 0, 0});
  CHECK(ints_of(nodes[3], "strides") == std::vector<int64_t>{2, 2});
  CHECK(ints_of(nodes[6], "pads") == std::vector<int64_t>{1, 1, 1, 1});
  const auto epsilon = parse(one(nodes[1], 5).bytes);
  CHECK(one(epsilon, 1).bytes == "epsilon");
  float eps = 0;
  const auto bits = static_cast<uint32_t>(one(epsilon, 2).value);
  std::memcpy(&eps, &bits, 4);
  CHECK(eps == 1e-5f);
  CHECK(fields(nodes[1], 1).size() == 5);  // X, scale, B, mean, var

  const auto input = value_info(one(graph, 11).bytes);
  CHECK(input.first == "z");
  CHECK(input.second == std::vector<std::string>{"N", "8", "1", "1"});
  const auto output = value_info(one(graph, 12).bytes);
  CHECK(output.first == "image");
  CHECK(output.second == std::vector<std::string>{"N", "1", "16", "16"});

  // Initializers: every weight and running statistic, float, with the state_dict's bytes.
  const auto initializers = fields(graph, 5);
  CHECK(initializers.size() == 3 + 2 * 4);
  bool found_weight = false;
  for (const Field& t : initializers) {
    const auto tensor = parse(t.bytes);
    CHECK(one(tensor, 2).value == 1);  // FLOAT
    const std::string name = one(tensor, 8).bytes;
    REQUIRE(sd.count(name) == 1);
    const Tensor& want = sd.at(name);
    std::vector<int64_t> dims;
    for (const Field& d : fields(tensor, 1)) dims.push_back(static_cast<int64_t>(d.value));
    CHECK(dims == want.shape());
    const std::string& raw = one(tensor, 9).bytes;
    REQUIRE(raw.size() == want.nbytes());
    CHECK(std::memcmp(raw.data(), want.data(), raw.size()) == 0);
    found_weight = found_weight || name == "main.6.weight";
  }
  CHECK(found_weight);
}

TEST_CASE("onnx export: later opsets get their IR version and others are refused") {
  const std::string path = test::data_path("pth_netG_nc1.pth");
  const nn::StateDict sd = nn::load_state_dict_file(path);
  const onnx::Graph g = onnx::generator_graph(sd, nn::infer_generator_config(sd, path), path);
  CHECK(one(parse(onnx::encode_model(g, 18, "t")), 1).value == 8);
  CHECK(one(parse(onnx::encode_model(g, 19, "t")), 1).value == 9);
  CHECK(one(parse(onnx::encode_model(g, 21, "t")), 1).value == 10);
  CHECK_THROWS_WITH_AS(onnx::encode_model(g, 16, "t"), "ONNX opset 16 (expected 17..23)", Error);
}
