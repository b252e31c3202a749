#include "ganengine/training_state.h"

#include <sstream>

#include "ganengine/safetensors.h"

namespace ge {

namespace {

constexpr const char* kFormat = "ganengine-training-state-1";

// Visits every tensor of the state under its key; `t` is the live tensor to save or fill.
template <class Visit>
void for_each_state_tensor(DcganTrainer& trainer, Visit&& visit) {
  struct Net {
    const char* prefix;
    nn::Sequential& net;
    Adam& opt;
  };
  for (Net n : {Net{"G.", trainer.generator(), trainer.optimizer_G()},
                Net{"D.", trainer.discriminator(), trainer.optimizer_D()}}) {
    auto params = n.net.named_params();
    for (size_t i = 0; i < params.size(); ++i) {
      const std::string key = n.prefix + params[i].first;
      nn::Param* p = params[i].second;
      visit(key + ".value", p->value);
      if (p->master.defined()) visit(key + ".master", p->master);
      visit(key + ".exp_avg", n.opt.exp_avg()[i]);
      visit(key + ".exp_avg_sq", n.opt.exp_avg_sq()[i]);
    }
    for (auto& [name, b] : n.net.named_buffers())
      if (b.tensor) visit(n.prefix + name, *b.tensor);
    visit(std::string(n.prefix) + "adam_step", n.opt.step_count());
  }
  for (int i = 0; i < 3; ++i) visit("scaler" + std::to_string(i), trainer.scaler_state(i));
}

template <class Visit>
void for_each_counter(DcganTrainer& trainer, Visit&& visit) {
  for (auto [prefix, net] : {std::pair<const char*, nn::Sequential*>{"G.", &trainer.generator()},
                             std::pair<const char*, nn::Sequential*>{"D.", &trainer.discriminator()}})
    for (auto& [name, b] : net->named_buffers())
      if (b.counter) visit(prefix + name, *b.counter);
}

std::map<std::string, std::string> identity_fields(const RunIdentity& id) {
  return {{"dataset", id.dataset},
          {"opt_level", id.opt_level},
          {"half", id.half},
          {"batchSize", std::to_string(id.batch_size)},
          {"imageSize", std::to_string(id.image_size)},
          {"nz", std::to_string(id.nz)},
          {"ngf", std::to_string(id.ngf)},
          {"ndf", std::to_string(id.ndf)},
          {"nc", std::to_string(id.nc)},
          {"manualSeed", std::to_string(id.seed)}};
}

}  // namespace

void save_training_state(const std::string& path, DcganTrainer& trainer, const Tensor& fixed_noise,
                         const RunPosition& pos, const RunIdentity& id) {
  std::map<std::string, Tensor> tensors;
  for_each_state_tensor(trainer, [&](const std::string& key, Tensor& t) { tensors[key] = t; });
  for_each_counter(trainer, [&](const std::string& key, int64_t& c) {
    Tensor t = Tensor::empty({}, DType::I64);
    *t.data_as<int64_t>() = c;
    tensors[key] = t;
  });
  tensors["fixed_noise"] = fixed_noise;
  auto meta = identity_fields(id);
  meta["format"] = kFormat;
  meta["epoch"] = std::to_string(pos.epoch);
  meta["iteration"] = std::to_string(pos.iteration);
  meta["global_step"] = std::to_string(pos.global_step);
  save_safetensors(path, tensors, meta);
}

void copy_training_state(DcganTrainer& from, DcganTrainer& to) {
  std::vector<Tensor> sources;
  for_each_state_tensor(from, [&](const std::string&, Tensor& t) { sources.push_back(t); });
  size_t next = 0;
  for_each_state_tensor(to, [&](const std::string& key, Tensor& t) {
    GE_CHECK(next < sources.size() && sources[next].shape() == t.shape() && sources[next].dtype() == t.dtype(),
             "copy_training_state: the trainers differ at '", key, "' (built with other settings)");
    const Tensor& src = sources[next++];
    t.copy_from(src.format() == t.format() ? src : src.to_format(t.format()));  // across devices too
  });
  GE_CHECK(next == sources.size(), "copy_training_state: the trainers hold different numbers of tensors");
  std::vector<int64_t> counters;
  for_each_counter(from, [&](const std::string&, int64_t& c) { counters.push_back(c); });
  next = 0;
  for_each_counter(to, [&](const std::string&, int64_t& c) { c = counters.at(next++); });
}

RunPosition load_training_state(const std::string& path, DcganTrainer& trainer, Tensor& fixed_noise,
                                const RunIdentity& expected) {
  SafeTensorsFile f = load_safetensors(path);
  auto fmt = f.metadata.find("format");
  if (fmt == f.metadata.end() || fmt->second != kFormat)
    fail(path, " is not a ganengine training-state file (expected metadata format=", kFormat,
         "); --resume takes the training_state.safetensors that `ganengine train` writes into --outf");
  std::ostringstream differs;
  for (auto& [k, v] : identity_fields(expected)) {
    auto it = f.metadata.find(k);
    const std::string saved = it == f.metadata.end() ? "(missing)" : it->second;
    if (saved != v) differs << "\n  " << k << ": saved run " << saved << ", this run " << v;
  }
  if (!differs.str().empty())
    fail("cannot resume from ", path,
         ": it belongs to a run with other settings (pass the same flags):", differs.str());
  auto get = [&](const std::string& key) -> const Tensor& {
    auto it = f.tensors.find(key);
    if (it == f.tensors.end()) fail(path, ": tensor '", key, "' is missing (file damaged or from another version)");
    return it->second;
  };
  for_each_state_tensor(trainer, [&](const std::string& key, Tensor& t) {
    const Tensor& saved = get(key);
    if (saved.shape() != t.shape() || saved.dtype() != t.dtype())
      fail(path, ": tensor '", key, "' is ", saved.str(), ", expected ", dtype_name(t.dtype()), shape_str(t.shape()));
    t.copy_from(saved.rank() == 4 ? saved.to_format(t.format()).to(t.device()) : saved.to(t.device()));
  });
  for_each_counter(trainer, [&](const std::string& key, int64_t& c) {
    const Tensor& saved = get(key);
    if (saved.dtype() != DType::I64 || saved.numel() != 1) fail(path, ": '", key, "' must be an i64 scalar");
    c = *saved.data_as<int64_t>();
  });
  const Tensor& noise = get("fixed_noise");
  if (noise.shape() != fixed_noise.shape())
    fail(path, ": fixed_noise is ", noise.str(), ", expected ", fixed_noise.str());
  fixed_noise.copy_from(noise.to(fixed_noise.device()));
  RunPosition pos;
  try {
    pos.epoch = std::stoll(f.metadata.at("epoch"));
    pos.iteration = std::stoll(f.metadata.at("iteration"));
    pos.global_step = std::stoll(f.metadata.at("global_step"));
  } catch (const std::exception&) {
    fail(path, ": metadata epoch/iteration/global_step missing or not numbers");
  }
  return pos;
}

}  // namespace ge
