#include "ganengine/state_dict.h"

#include <set>
#include <sstream>

namespace ge::nn {

StateDict state_dict(Sequential& net) {
  StateDict sd;
  for (auto& [name, p] : net.named_params())
    sd[name] = ops::converted(p->optimizer_value(), DType::F32, MemoryFormat::NCHW, Device::cpu());
  for (auto& [name, b] : net.named_buffers()) {
    if (b.tensor) {
      sd[name] = ops::converted(*b.tensor, DType::F32, MemoryFormat::NCHW, Device::cpu());
    } else {
      Tensor t = Tensor::empty({}, DType::I64);
      *t.data_as<int64_t>() = *b.counter;
      sd[name] = t;
    }
  }
  return sd;
}

void load_state_dict(Sequential& net, const StateDict& sd, const std::string& what) {
  std::set<std::string> expected;
  std::ostringstream problems;
  auto check = [&](const std::string& name, const Shape& shape) -> const Tensor* {
    expected.insert(name);
    auto it = sd.find(name);
    if (it == sd.end()) {
      problems << "\n  missing key " << name << " (shape " << shape_str(shape) << ")";
      return nullptr;
    }
    if (it->second.shape() != shape && !(shape.empty() && it->second.numel() == 1)) {
      problems << "\n  " << name << ": shape " << shape_str(it->second.shape()) << " in the file, " << shape_str(shape)
               << " in this network";
      return nullptr;
    }
    if (!is_floating(it->second.dtype()) && it->second.dtype() != DType::I64) {
      problems << "\n  " << name << ": dtype " << dtype_name(it->second.dtype()) << " is not a number type";
      return nullptr;
    }
    return &it->second;
  };
  std::vector<std::pair<Param*, const Tensor*>> params;
  std::vector<std::pair<Buffer, const Tensor*>> buffers;
  for (auto& [name, p] : net.named_params())
    if (const Tensor* t = check(name, p->value.shape())) params.emplace_back(p, t);
  for (auto& [name, b] : net.named_buffers())
    if (const Tensor* t = check(name, b.tensor ? b.tensor->shape() : Shape{})) buffers.emplace_back(b, t);
  for (auto& kv : sd)
    if (!expected.count(kv.first)) problems << "\n  unexpected key " << kv.first;
  if (!problems.str().empty())
    fail(what, " does not fit this network (check --imageSize, --nz, --ngf, --ndf and the dataset's channels):",
         problems.str());
  for (auto& [p, t] : params) {
    if (!is_floating(t->dtype())) fail(what, ": a weight is stored as ", dtype_name(t->dtype()));
    assign_param(*p, ops::converted(*t, DType::F32, MemoryFormat::NCHW, Device::cpu()));
  }
  for (auto& [b, t] : buffers) {
    if (b.tensor) {
      b.tensor->copy_from(ops::converted(*t, b.tensor->dtype(), b.tensor->format(), b.tensor->device()));
    } else {
      *b.counter = static_cast<int64_t>(t->to_doubles()[0]);
    }
  }
}

}  // namespace ge::nn
