#include "io/onnx_generator.h"

namespace ge::onnx {
namespace {

Initializer initializer(const nn::StateDict& sd, const std::string& name, const std::string& what) {
  auto it = sd.find(name);
  if (it == sd.end()) fail(what, ": no tensor '", name, "' for the ONNX graph");
  const Tensor host = ops::converted(it->second, DType::F32, MemoryFormat::NCHW, Device::cpu());
  return {name, host.shape(), host.to_floats()};
}

}  // namespace

Graph generator_graph(const nn::StateDict& sd, const nn::NetConfig& cfg, const std::string& what) {
  Graph g;
  g.name = "dcgan_generator";
  g.inputs.push_back({"z", {{0, "N"}, {cfg.nz, ""}, {1, ""}, {1, ""}}});
  g.outputs.push_back({"image", {{0, "N"}, {cfg.nc, ""}, {cfg.image_size, ""}, {cfg.image_size, ""}}});
  std::string x = "z";
  // Layer k of the Sequential: blocks of three (ConvTranspose2d, BatchNorm2d, ReLU), then the
  // image's ConvTranspose2d and Tanh, as nn::make_generator builds it.
  int index = 0;
  for (int side = 4; side <= cfg.image_size; side *= 2, index += 3) {
    const bool first = side == 4;
    const bool last = side == cfg.image_size;
    const std::string conv = "main." + std::to_string(index);
    g.initializers.push_back(initializer(sd, conv + ".weight", what));
    g.nodes.push_back(
        {"ConvTranspose",
         conv,
         {x, conv + ".weight"},
         {conv},
         {ints_attribute("kernel_shape", {4, 4}), ints_attribute("strides", {first ? 1 : 2, first ? 1 : 2}),
          ints_attribute("pads", first ? std::vector<int64_t>{0, 0, 0, 0} : std::vector<int64_t>{1, 1, 1, 1})}});
    x = conv;
    if (last) break;
    const std::string bn = "main." + std::to_string(index + 1);
    for (const char* part : {".weight", ".bias", ".running_mean", ".running_var"})
      g.initializers.push_back(initializer(sd, bn + part, what));
    g.nodes.push_back({"BatchNormalization",
                       bn,
                       {x, bn + ".weight", bn + ".bias", bn + ".running_mean", bn + ".running_var"},
                       {bn},
                       {float_attribute("epsilon", nn::BatchNorm2d::kEps)}});
    const std::string relu = "main." + std::to_string(index + 2);
    g.nodes.push_back({"Relu", relu, {bn}, {relu}, {}});
    x = relu;
  }
  g.nodes.push_back({"Tanh", "main." + std::to_string(index + 1), {x}, {"image"}, {}});
  return g;
}

}  // namespace ge::onnx
