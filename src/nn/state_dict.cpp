#include "ganengine/state_dict.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "ganengine/safetensors.h"
#include "io/file_kind.h"
#include "io/pth_reader.h"

namespace ge::nn {
namespace {

// A safetensors file opens with its header's 8-byte length and the JSON's '{'; one that does but
// fails sniff_file_kind (a header longer than the file: truncated) is left to load_safetensors,
// which names what is wrong with it.
bool may_be_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[9] = {};
  return in.read(head, sizeof head) && head[8] == '{';
}

}  // namespace

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

namespace {

// DataParallel's state_dict names every entry "module.<name>": the wrapped network's names.
StateDict without_data_parallel_prefix(StateDict sd) {
  const std::string prefix = "module.";
  for (const auto& kv : sd)
    if (kv.first.compare(0, prefix.size(), prefix) != 0) return sd;
  StateDict out;
  for (auto& [name, t] : sd) out.emplace(name.substr(prefix.size()), std::move(t));
  return out;
}

}  // namespace

StateDict load_state_dict_file(const std::string& path) {
  if (!std::ifstream(path, std::ios::binary))
    fail(path, ": cannot open weights (.safetensors or .pth): ", std::strerror(errno));
  const FileKind kind = sniff_file_kind(path);
  if (kind == FileKind::Unknown && !may_be_safetensors(path))
    fail(path,
         ": neither a PyTorch .pth (torch.save's ZIP or legacy format) nor a safetensors file: its first bytes "
         "match neither; give a state_dict that torch.save or ganengine wrote");
  StateDict sd = kind == FileKind::PthZip || kind == FileKind::PthLegacy || kind == FileKind::Zip
                     ? load_pth_state_dict(path)
                     : load_safetensors(path).tensors;
  return without_data_parallel_prefix(std::move(sd));
}

NetConfig infer_generator_config(const StateDict& sd, const std::string& what) {
  auto first = sd.find("main.0.weight");
  if (first == sd.end() || first->second.rank() != 4)
    fail(what, " has no 4-D 'main.0.weight': not a DCGAN generator's state_dict");
  int transposed = 0;
  const Tensor* last = nullptr;
  for (int i = 0; i < 64; i += 3) {
    auto it = sd.find("main." + std::to_string(i) + ".weight");
    if (it == sd.end() || it->second.rank() != 4) break;
    ++transposed;
    last = &it->second;
  }
  if (transposed < 3)
    fail(what, ": found ", transposed, " transposed convolutions; a DCGAN generator has at least 3 (16x16 images)");
  NetConfig cfg;
  cfg.nz = first->second.dim(0);
  cfg.ngf = last->dim(0);
  cfg.nc = last->dim(1);
  cfg.image_size = 1 << (transposed + 1);
  return cfg;
}

}  // namespace ge::nn
