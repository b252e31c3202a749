#include "ganengine/training_state.h"

#include <cmath>
#include <sstream>

#include "core/host_device_math.h"
#include "ganengine/safetensors.h"
#include "train/checkpoint_set.h"

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
    // O4's delayed scaling: without it a resumed run would quantize with other scales.
    for (auto& [name, s] : n.net.named_fp8_scalings())
      for (auto [role, state] : s->named()) {
        const std::string key = n.prefix + name + ".fp8_" + role;
        visit(key + ".amax_history", state->amax_history);
        visit(key + ".scale", state->scale);
        visit(key + ".scale_inv", state->scale_inv);
      }
  }
  for (int i = 0; i < 3; ++i) visit("scaler" + std::to_string(i), trainer.scaler_state(i));
}

// The moving average of G's weights (TrainerConfig::ema_decay), when the trainer keeps one: its
// own keys, "G_ema.<name>", so that a state written without it still loads.
template <class Visit>
void for_each_ema_tensor(DcganTrainer& trainer, Visit&& visit) {
  std::vector<Tensor>& ema = trainer.generator_ema();
  if (ema.empty()) return;
  auto params = trainer.generator().named_params();
  for (size_t i = 0; i < params.size(); ++i) visit("G_ema." + params[i].first, ema[i]);
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

// A position field: decimal digits only, as save_training_state writes them ("1x", "-3" and
// "1e3" are damage, not numbers to round).
int64_t position_field(const std::string& path, const std::map<std::string, std::string>& meta, const char* key) {
  const auto it = meta.find(key);
  const std::string text = it == meta.end() ? "" : it->second;
  if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos)
    fail(path, ": metadata ", key, " is ", it == meta.end() ? "missing" : "'" + text + "'",
         " (expected a whole number >= 0, as ganengine train writes it; the file is damaged)");
  return std::stoll(text);  // at most 18 digits: fits
}

// Each scaler is (scale, steps since the last overflow), both finite, the scale positive: a
// damaged one would otherwise surface as a diverged run.
void check_scaler(const std::string& path, int i, const Tensor& saved) {
  static const char* const kLoss[3] = {"errD_real", "errD_fake", "errG"};
  const std::vector<double> v = saved.to_doubles();
  if (v.size() != 2 || !std::isfinite(v[0]) || !(v[0] > 0) || !std::isfinite(v[1]) || v[1] < 0)
    fail(path, ": the loss scaler of ", kLoss[i], " holds (", v.empty() ? 0.0 : v[0], ", ", v.size() < 2 ? 0.0 : v[1],
         ") (expected a positive finite scale and a step count >= 0): the file is damaged, resume from another "
         "copy of the training state");
}

// An FP8 scale or its inverse is positive and finite, an amax never negative (an infinite or NaN
// one is what an overflowing step records): anything else is damage that would quantize wrongly.
void check_fp8_state(const std::string& path, const std::string& key, const Tensor& saved) {
  const bool history = key.size() > 13 && key.compare(key.size() - 13, 13, ".amax_history") == 0;
  for (double v : saved.to_doubles())
    if (history ? v < 0 : !(std::isfinite(v) && v > 0))
      fail(path, ": '", key, "' holds ", v, " (expected ", history ? "amaxes >= 0" : "a positive finite value",
           "): the file is damaged, resume from another copy of the training state");
}

// The recipe writes scale_inv as 1 / scale (fp8_delayed_scaling_step), so a pair that disagrees is
// damage: resumed, it would turn the FP8 values of that tensor back with the wrong factor.
void check_fp8_inverse(const std::string& path, const std::string& scale_inv_key, const Tensor& scale_inv,
                       const std::string& scale_key, const Tensor& scale) {
  check_fp8_state(path, scale_key, scale);  // a damaged scale is named as such, whichever comes first
  const float s = static_cast<float>(scale.to_doubles().at(0)),
              s_inv = static_cast<float>(scale_inv.to_doubles().at(0));
  if (float_bits(fdiv_rn(1.0f, s)) != float_bits(s_inv))
    fail(path, ": '", scale_inv_key, "' holds ", s_inv, ", not 1 / ", s, " as its scale says (expected ",
         fdiv_rn(1.0f, s), "): the file is damaged, resume from another copy of the training state");
}

}  // namespace

SafeTensorsFile training_state_contents(DcganTrainer& trainer, const Tensor& fixed_noise, const RunPosition& pos,
                                        const RunIdentity& id) {
  std::map<std::string, Tensor> tensors;
  for_each_state_tensor(trainer, [&](const std::string& key, Tensor& t) { tensors[key] = t; });
  for_each_ema_tensor(trainer, [&](const std::string& key, Tensor& t) { tensors[key] = t; });
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
  return SafeTensorsFile{tensors, meta};
}

void save_training_state(const std::string& path, DcganTrainer& trainer, const Tensor& fixed_noise,
                         const RunPosition& pos, const RunIdentity& id) {
  const SafeTensorsFile contents = training_state_contents(trainer, fixed_noise, pos, id);
  save_safetensors(path, contents.tensors, contents.metadata);
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
  GE_CHECK(from.generator_ema().size() == to.generator_ema().size(),
           "copy_training_state: one trainer keeps a moving average of G's weights, the other does not");
  for (size_t i = 0; i < to.generator_ema().size(); ++i) to.generator_ema()[i].copy_from(from.generator_ema()[i]);
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
    if (key.rfind("scaler", 0) == 0) check_scaler(path, key.back() - '0', saved);
    if (key.find(".fp8_") != std::string::npos) {
      check_fp8_state(path, key, saved);
      if (key.size() > 10 && key.compare(key.size() - 10, 10, ".scale_inv") == 0) {
        const std::string scale_key = key.substr(0, key.size() - 4);  // "....fp8_X.scale"
        check_fp8_inverse(path, key, saved, scale_key, get(scale_key));
      }
    }
    t.copy_from(saved.rank() == 4 ? saved.to_format(t.format()).to(t.device()) : saved.to(t.device()));
  });
  // A state saved without the average (the run had --ema-decay off) starts it from the weights
  // just restored.
  bool ema_saved = true;
  for_each_ema_tensor(trainer, [&](const std::string& key, Tensor&) { ema_saved = ema_saved && f.tensors.count(key); });
  if (!ema_saved) trainer.restart_ema();
  if (ema_saved)
    for_each_ema_tensor(trainer, [&](const std::string& key, Tensor& t) {
      const Tensor& saved = get(key);
      if (saved.shape() != t.shape() || saved.dtype() != DType::F32)
        fail(path, ": tensor '", key, "' is ", saved.str(), ", expected f32", shape_str(t.shape()));
      t.copy_from(saved.rank() == 4 ? saved.to_format(t.format()).to(t.device()) : saved.to(t.device()));
    });
  for_each_counter(trainer, [&](const std::string& key, int64_t& c) {
    const Tensor& saved = get(key);
    if (saved.dtype() != DType::I64 || saved.numel() != 1) fail(path, ": '", key, "' must be an i64 scalar");
    c = *saved.data_as<int64_t>();
  });
  const Tensor& noise = get("fixed_noise");
  if (noise.shape() != fixed_noise.shape() || noise.dtype() != fixed_noise.dtype())
    fail(path, ": fixed_noise is ", noise.str(), ", expected ", fixed_noise.str());
  fixed_noise.copy_from(noise.to(fixed_noise.device()));
  RunPosition pos;
  pos.epoch = position_field(path, f.metadata, "epoch");
  pos.iteration = position_field(path, f.metadata, "iteration");
  pos.global_step = position_field(path, f.metadata, "global_step");
  verify_checkpoint_set(path, f.metadata);
  return pos;
}

}  // namespace ge
