// An ONNX model as protobuf bytes (onnx/onnx.proto: ModelProto, GraphProto, NodeProto,
// AttributeProto, TensorProto, ValueInfoProto), with only the fields a feed-forward graph of
// float tensors needs: nodes with int, float and int-list attributes, float initializers stored
// as raw little-endian data, and inputs and outputs whose dimensions are numbers or names
// (a named dimension, such as the batch, is left free for the runtime).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ge::onnx {

struct Dimension {
  int64_t value = 0;
  std::string param;  // when not empty, a symbolic dimension and value is unused
};

struct ValueInfo {
  std::string name;
  std::vector<Dimension> shape;  // of float (elem_type FLOAT) tensors
};

struct Attribute {
  enum class Kind { Float, Int, Ints } kind = Kind::Int;
  std::string name;
  float f = 0;
  int64_t i = 0;
  std::vector<int64_t> ints;
};

struct Node {
  std::string op_type;
  std::string name;
  std::vector<std::string> inputs, outputs;
  std::vector<Attribute> attributes;
};

struct Initializer {
  std::string name;
  std::vector<int64_t> dims;
  std::vector<float> values;
};

struct Graph {
  std::string name;
  std::vector<Node> nodes;
  std::vector<Initializer> initializers;
  std::vector<ValueInfo> inputs, outputs;
};

Attribute int_attribute(const std::string& name, int64_t value);
Attribute float_attribute(const std::string& name, float value);
Attribute ints_attribute(const std::string& name, std::vector<int64_t> values);

// The model's bytes: IR version 8, the default operator set at `opset` (17 or later: IR 8
// covers opsets up to 18, and later opsets ask for a later IR version, chosen here).
std::string encode_model(const Graph& graph, int opset, const std::string& producer_version);

}  // namespace ge::onnx
