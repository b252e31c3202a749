// Field numbers from onnx/onnx.proto (proto2). Repeated scalars are written unpacked, as proto2
// declares them; every protobuf parser accepts that form.
#include "io/onnx_writer.h"

#include <cstring>

#include "ganengine/error.h"
#include "io/protobuf_writer.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "TensorProto.raw_data is little-endian: written as host memory");

namespace ge::onnx {
namespace {

// TensorProto.DataType.FLOAT and AttributeProto.AttributeType values.
constexpr int64_t kFloat = 1;
constexpr int64_t kAttributeFloat = 1;
constexpr int64_t kAttributeInt = 2;
constexpr int64_t kAttributeInts = 7;

ProtobufWriter encode_value_info(const ValueInfo& v) {
  ProtobufWriter shape;  // TensorShapeProto
  for (const Dimension& d : v.shape) {
    ProtobufWriter dim;  // TensorShapeProto.Dimension
    if (d.param.empty())
      dim.int64(1, d.value);  // dim_value
    else
      dim.string(2, d.param);  // dim_param
    shape.message(1, dim);
  }
  ProtobufWriter tensor_type;    // TypeProto.Tensor
  tensor_type.int64(1, kFloat);  // elem_type
  tensor_type.message(2, shape);
  ProtobufWriter type;  // TypeProto
  type.message(1, tensor_type);
  ProtobufWriter info;  // ValueInfoProto
  info.string(1, v.name);
  info.message(2, type);
  return info;
}

ProtobufWriter encode_attribute(const Attribute& a) {
  ProtobufWriter w;  // AttributeProto
  w.string(1, a.name);
  switch (a.kind) {
    case Attribute::Kind::Float:
      w.float32(2, a.f);
      w.int64(20, kAttributeFloat);
      break;
    case Attribute::Kind::Int:
      w.int64(3, a.i);
      w.int64(20, kAttributeInt);
      break;
    case Attribute::Kind::Ints:
      for (int64_t v : a.ints) w.int64(8, v);
      w.int64(20, kAttributeInts);
      break;
  }
  return w;
}

ProtobufWriter encode_node(const Node& n) {
  ProtobufWriter w;  // NodeProto
  for (const std::string& in : n.inputs) w.string(1, in);
  for (const std::string& out : n.outputs) w.string(2, out);
  w.string(3, n.name);
  w.string(4, n.op_type);
  for (const Attribute& a : n.attributes) w.message(5, encode_attribute(a));
  return w;
}

ProtobufWriter encode_initializer(const Initializer& t) {
  int64_t numel = 1;
  for (int64_t d : t.dims) numel *= d;
  GE_CHECK(numel == static_cast<int64_t>(t.values.size()), "initializer ", t.name, ": dims hold ", numel,
           " values, given ", t.values.size());
  ProtobufWriter w;  // TensorProto
  for (int64_t d : t.dims) w.int64(1, d);
  w.int64(2, kFloat);  // data_type
  w.string(8, t.name);
  w.bytes(9, t.values.data(), t.values.size() * sizeof(float));  // raw_data
  return w;
}

}  // namespace

Attribute int_attribute(const std::string& name, int64_t value) {
  Attribute a;
  a.kind = Attribute::Kind::Int;
  a.name = name;
  a.i = value;
  return a;
}

Attribute float_attribute(const std::string& name, float value) {
  Attribute a;
  a.kind = Attribute::Kind::Float;
  a.name = name;
  a.f = value;
  return a;
}

Attribute ints_attribute(const std::string& name, std::vector<int64_t> values) {
  Attribute a;
  a.kind = Attribute::Kind::Ints;
  a.name = name;
  a.ints = std::move(values);
  return a;
}

std::string encode_model(const Graph& graph, int opset, const std::string& producer_version) {
  if (opset < 17 || opset > 23) fail("ONNX opset ", opset, " (expected 17..23)");
  // IR versions by opset: 8 up to opset 18, 9 for 19 and 20, 10 for 21 and 22, 11 for 23.
  const int64_t ir_version = opset <= 18 ? 8 : opset <= 20 ? 9 : opset <= 22 ? 10 : 11;
  ProtobufWriter g;  // GraphProto
  for (const Node& n : graph.nodes) g.message(1, encode_node(n));
  g.string(2, graph.name);
  for (const Initializer& t : graph.initializers) g.message(5, encode_initializer(t));
  for (const ValueInfo& v : graph.inputs) g.message(11, encode_value_info(v));
  for (const ValueInfo& v : graph.outputs) g.message(12, encode_value_info(v));

  ProtobufWriter opset_import;  // OperatorSetIdProto: the default domain ""
  opset_import.string(1, "");
  opset_import.int64(2, opset);

  ProtobufWriter model;  // ModelProto
  model.int64(1, ir_version);
  model.string(2, "ganengine");
  model.string(3, producer_version);
  model.message(7, g);
  model.message(8, opset_import);
  return model.str();
}

}  // namespace ge::onnx
