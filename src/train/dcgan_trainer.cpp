#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "ganengine/trainer.h"

#include "core/tuning_policy.h"
#include "ganengine/concurrent_region.h"
#include "nn/fusion_plan.h"
#include "runtime/profiling.h"

namespace ge {

namespace {
// Slots of the per-step record tensor.
enum Slot { kErr = 0, kProb = 3, kFound = 6, kScale = 9, kSlots = 12 };
constexpr float kReal = 1.f, kFake = 0.f;

// Sequential::form_fp8_weights of each network for the life of a step, dropped at its end or on an
// exception, so that no forward outside the step reads a version of the weights formed in it.
class FormedFp8Weights {
 public:
  explicit FormedFp8Weights(std::vector<nn::Sequential*> nets) : nets_(std::move(nets)) {
    for (nn::Sequential* net : nets_) net->form_fp8_weights();
  }
  ~FormedFp8Weights() {
    for (nn::Sequential* net : nets_) net->drop_fp8_weights();
  }
  FormedFp8Weights(const FormedFp8Weights&) = delete;
  FormedFp8Weights& operator=(const FormedFp8Weights&) = delete;
  // After `net`'s weights changed.
  void form_again(nn::Sequential& net) {
    if (std::find(nets_.begin(), nets_.end(), &net) != nets_.end()) net.form_fp8_weights();
  }

 private:
  std::vector<nn::Sequential*> nets_;
};
}  // namespace

DcganTrainer::DcganTrainer(const TrainerConfig& cfg)
    : cfg_(cfg), where_(nn::Placement::for_device(cfg.device, cfg.policy.compute_dtype)) {
  G_ = nn::make_generator(cfg_.net, cfg_.policy, where_);
  D_ = nn::make_discriminator(cfg_.net, cfg_.policy, where_);
  // G's last layer does not keep its channel padding (Conv2d::keep_padded_output): the fake
  // batch takes 3 channels, not 8, for as long as D and G hold it (at batch 1024, 40 MiB less at
  // the step's peak). G's output and D's input gradient are written with their 3 channels (the
  // GPU's 8-channel backward-data kernel), with no trimming copy.
  // G's Tanh runs inside G's last layer, and its gradient is taken by D's first layer as it
  // writes the input gradient of G's pass through D (the fake batch is both Tanh's output and
  // D's input): one op and three passes over the fake batch's gradient less.
  // (The layer list keeps the activation after the convolution that runs it: Sequential.)
  nn::apply_step_fusion(nn::plan_step_fusion(*G_, *D_), *G_, *D_);
  if (cfg_.sync_batchnorm) {
    if (!cfg_.replicas) fail("--sync-bn synchronises BatchNorm across replicas: it needs --ngpu > 1 or mpirun");
    ReplicaGroup* group = cfg_.replicas;
    for (nn::Sequential* net : {G_.get(), D_.get()})
      for (auto& layer : net->layers())
        if (auto* bn = dynamic_cast<nn::BatchNorm2d*>(layer.get()))
          bn->sync_statistics([group](const Tensor& t) { group->all_reduce_sum(t); });
  }
  nn::weights_init(*G_, cfg_.seed, /*stream=*/1);
  nn::weights_init(*D_, cfg_.seed, /*stream=*/2);
  ops::AdamConfig adam;
  adam.lr = cfg_.lr;
  adam.beta1 = cfg_.beta1;
  optG_ = std::make_unique<Adam>(G_->params(), adam, cfg_.device);
  optD_ = std::make_unique<Adam>(D_->params(), adam, cfg_.device);
  scaler_cfg_.dynamic = cfg_.policy.dynamic_loss_scale;
  scaler_cfg_.min_scale = cfg_.policy.min_loss_scale;
  for (auto& s : scaler_) s = Tensor::from_doubles({cfg_.policy.initial_loss_scale, 0.0}, {2}, DType::F32, cfg_.device);
  if (!(cfg_.ema_decay >= 0 && cfg_.ema_decay < 1))
    fail("EMA decay ", cfg_.ema_decay, " (expected 0 <= decay < 1; 0 turns the average off)");
  restart_ema();
  record_ = Tensor::zeros({kSlots}, DType::F32, cfg_.device);
  no_skip_ = Tensor::zeros({1}, DType::F32, cfg_.device);
  if (cfg_.cuda_graph) {
    if (!cfg_.device.is_cuda())
      fail("CUDA graph mode (--cuda-graph) needs a CUDA device; this trainer runs on ", cfg_.device.str());
    if (cfg_.cuda_graph_warmup < 2)
      fail("cuda_graph_warmup ", cfg_.cuda_graph_warmup,
           ": at least 2 eager steps must run before the step is captured into a CUDA graph");
    graph_ = std::make_unique<CudaGraph>();
  }
}

void DcganTrainer::force_overflow_next_step(LossId id) {
  if (cfg_.cuda_graph)
    fail(
        "the forced-overflow test hook (--debug-force-overflow) changes a step from the host, which a replayed "
        "CUDA graph cannot do: run without --cuda-graph");
  forced_[id] = true;
}

// Apex's scale_loss for one loss: backward of loss * scale into fresh model gradients, then
// unscale them into the f32 gradients the optimizer reads (adding what the optimizer's earlier
// losses left there), checking only this loss's gradients for overflow, then update the scaler.
// For D's losses the gradients are D's; for G's loss they flow through D (whose weight gradients
// are not computed) into G.
void DcganTrainer::scaled_backward(nn::Sequential& d, const Tensor& logits, float target, LossId id, bool accumulate,
                                   ConcurrentRegion::Mark accumulate_after) {
  Tensor scale = scaler_[id].slice0(0, 1);
  // The record's copy of the scale, beside what follows (no kernel waits for it): after the
  // scaler's update, or with a static scale, which no update changes, now. Issued after the
  // backward pass, the copy was the last thing the lanes' join before the optimizer waited for
  // (a node and two dependencies between D's last gradient and D's update at batch 64).
  Tensor recorded = record_.slice0(kScale + id, kScale + id + 1);
  auto record_scale = [&] { on_side_lane([&] { recorded.copy_from(scale); }); };
  if (!cfg_.policy.dynamic_loss_scale) record_scale();
  Tensor dlogits = Tensor::empty(logits.shape(), logits.dtype(), logits.device(), logits.format());
  ops::bce_with_logits_backward(logits, target, scale, dlogits);
  nn::Sequential* owner = &d;
  if (id == kLossG) {
    Tensor dfake = d.backward(dlogits, /*want_param_grads=*/false, /*want_input_grad=*/true);
    G_->backward(dfake, true, false);
    owner = G_.get();
  } else {
    d.backward(dlogits, true, false);  // the input is data or fake.detach(): no input gradient
  }
  // The filter gradients may still be computing on the side lane (Conv2d::backward).
  ConcurrentRegion* region = ConcurrentRegion::active(cfg_.device);
  if (region) {
    region->join();
    region->wait(accumulate_after);
  }
  auto params = owner->params();
  if (forced_[id]) {
    ops::scale_inplace(params.front()->model_grad, INFINITY);
    forced_[id] = false;
  }
  std::vector<Tensor> src, dst;
  for (nn::Param* p : params) {
    src.push_back(p->model_grad);
    dst.push_back(p->grad);
  }
  Tensor found = record_.slice0(kFound + id, kFound + id + 1);
  // An optimizer's last loss: with a static scale no step is skipped, so nothing waits for the
  // overflow flag and the optimizer can unscale these gradients as it reads them, without writing
  // them into Param::grad (it is their only reader): one pass over them and one kernel less
  // between the backward pass and the update. p->grad then holds the earlier losses' sum.
  const bool last = id != kLossDReal;
  if (last && optimizer_unscales(params))
    pending_[id == kLossG] = ops::PendingGrads{src, scale, found, accumulate, /*store_grads=*/false};
  else
    ops::unscale_grads(src, dst, scale, found, accumulate);
  // Every replica must take the same decision: an overflow anywhere skips the step everywhere.
  if (cfg_.replicas) cfg_.replicas->all_reduce_max(found);
  ops::loss_scaler_update(scaler_[id], found, scaler_cfg_);
  if (cfg_.policy.dynamic_loss_scale) record_scale();
}

void DcganTrainer::restart_ema() {
  // A captured step holds the averages' addresses.
  if (graph_ && graph_->captured()) fail("restart_ema: the step has been captured into a CUDA graph already");
  ema_.clear();
  if (cfg_.ema_decay == 0) return;
  for (nn::Param* p : G_->params()) {
    const Tensor& w = p->optimizer_value();
    ema_.push_back(w.dtype() == DType::F32 ? w.clone() : ops::converted(w, DType::F32, w.format(), w.device()));
  }
}

bool DcganTrainer::optimizer_unscales(const std::vector<nn::Param*>& params) const {
  if (!cfg_.optimizer_unscales_last_loss || cfg_.policy.dynamic_loss_scale || cfg_.replicas) return false;
  for (nn::Param* p : params)
    if (p->model_grad.dtype() != p->optimizer_value().dtype()) return false;
  return true;
}

void DcganTrainer::on_side_lane(const std::function<void()>& fn) {
  if (ConcurrentRegion* region = ConcurrentRegion::active(cfg_.device))
    region->on_side({}, fn);
  else
    fn();
}

void DcganTrainer::step(const Tensor& real_in, const Tensor& noise_in) {
  GE_CHECK(real_in.rank() == 4 && real_in.dim(1) == cfg_.net.nc && real_in.dim(2) == cfg_.net.image_size &&
               real_in.dim(3) == cfg_.net.image_size,
           "real batch ", real_in.str(), " does not match nc=", cfg_.net.nc, " imageSize=", cfg_.net.image_size);
  GE_CHECK(noise_in.rank() == 4 && noise_in.dim(0) == real_in.dim(0) && noise_in.dim(1) == cfg_.net.nz, "noise ",
           noise_in.str(), " for a batch of ", real_in.dim(0), " and nz=", cfg_.net.nz);
  ProfileRange range("train_step");
  // Stream priorities are set between steps: a captured graph keeps those it was captured with.
  ConcurrentRegion::rank_branch_side_below_branch(cfg_.device, use_branch_side_below(real_in));
  if (cfg_.cuda_graph) {
    graph_step(real_in, noise_in);
    return;
  }
  eager_step(real_in, noise_in);
}

void DcganTrainer::eager_step(const Tensor& real_in, const Tensor& noise_in) {
  // Inputs are cast to the compute dtype by the first layer (Apex casts O2/O3 inputs to half).
  const Tensor real = real_in.device() == cfg_.device ? real_in : real_in.to(cfg_.device);
  const Tensor noise = noise_in.device() == cfg_.device ? noise_in : noise_in.to(cfg_.device);
  step_body(real, noise);
}

// Everything here is device work on device tensors (no host synchronisation, no allocation
// beyond the caching allocator, no decision taken on the host from device values), so that the
// CUDA graph mode can capture it as it stands.
void DcganTrainer::step_body(const Tensor& real, const Tensor& noise) {
  // Lanes (concurrent_region.h): G's forward beside D's pass on the real batch, which it does
  // not depend on, or with the fake branch D's whole pass on the fake batch beside it; each
  // filter gradient beside the rest of its backward pass; and what only the record reads (the
  // losses, the probabilities, the scales) beside the passes.
  const bool side_lane = use_side_lane(real);
  const bool fake_branch = side_lane && use_fake_branch(real);
  // O4: each version of the weights rounded to FP8 once, in one launch a network, before anything
  // reads it (the lanes included): G's and D's now, D's again after its optimizer step.
  FormedFp8Weights formed(cfg_.policy.fp8_convolutions ? std::vector<nn::Sequential*>{G_.get(), D_.get()}
                                                       : std::vector<nn::Sequential*>{});
  ConcurrentRegion region(cfg_.device, side_lane);
  region.hold_kept_until_join(side_lane && use_side_hold(real));
  if (fake_branch) region.fork_branch();  // the fake batch's pass depends on nothing before it
  // The overflow flags the unscales set: zeroed before any of them, which come after a join of
  // this side lane (the fake branch's after the real loss's).
  Tensor found = record_.slice0(kFound, kFound + 3);
  on_side_lane([&] { found.fill_zero(); });
  // The caller keeps the logits alive until its backward pass has joined the side lane.
  auto loss_forward = [&](const Tensor& logits, float target, LossId id) {
    Tensor err = record_.slice0(kErr + id, kErr + id + 1), prob = record_.slice0(kProb + id, kProb + id + 1);
    on_side_lane([&] { ops::bce_with_logits_forward(logits, target, err, prob); });
  };
  Tensor out, fake;
  auto generate = [&] {
    ProfileRange r("G_forward");
    fake = G_->forward(noise, true);
  };
  auto fake_pass = [&](nn::Sequential& d, ConcurrentRegion::Mark accumulate_after) {
    ProfileRange r("D_fake");
    const Tensor logits = d.forward(fake, true);  // on fake.detach(): D's backward stops at its input
    loss_forward(logits, kFake, kLossDFake);
    scaled_backward(d, logits, kFake, kLossDFake, /*accumulate=*/true, accumulate_after);
  };

  // (1) Update D: maximize log(D(x)) + log(1 - D(G(z))). The NVTX ranges name the phases
  // for Nsight (profiling.h). Without the side lane G's forward comes after D's pass on the
  // real batch, as in the example, so that their activations are never held at once.
  if (side_lane && !fake_branch) region.on_side({}, generate);
  {
    ProfileRange r("D_real");
    out = D_->forward(real, true);
    loss_forward(out, kReal, kLossDReal);
    scaled_backward(*D_, out, kReal, kLossDReal, /*accumulate=*/false);  // joins: fake is ready after it
  }
  if (fake_branch) {
    // Issued after the real pass, so that the twin's BatchNorm updates follow D's (Layer::twin),
    // but ordered only after the fork at the step's start; the fake loss's gradients are added
    // to the real loss's once those are in.
    const ConcurrentRegion::Mark real_done = region.mark();
    region.on_branch([&] {
      generate();
      fake_pass(*D_->twin(), real_done);
    });
    region.join_branch();
  } else {
    if (!side_lane) generate();
    fake_pass(*D_, {});
  }
  {
    // An optimizer whose losses included an overflow skips its step (dynamic scaling only).
    ProfileRange r("D_step");
    average_grads(*D_);
    optD_->step(cfg_.policy.dynamic_loss_scale ? record_.slice0(kFound, kFound + 2) : no_skip_,
                pending_[0] ? &*pending_[0] : nullptr);
    pending_[0].reset();
    formed.form_again(*D_);
  }
  {
    // (2) Update G: maximize log(D(G(z))), through the freshly updated D.
    ProfileRange r("G_adv");
    out = D_->forward(fake, true);
    loss_forward(out, kReal, kLossG);
    scaled_backward(*D_, out, kReal, kLossG, /*accumulate=*/false);
  }
  {
    ProfileRange r("G_step");
    average_grads(*G_);
    optG_->step(cfg_.policy.dynamic_loss_scale ? record_.slice0(kFound + 2, kFound + 3) : no_skip_,
                pending_[1] ? &*pending_[1] : nullptr);
    pending_[1].reset();
    if (!ema_.empty()) {
      std::vector<Tensor> weights;
      for (nn::Param* p : G_->params()) weights.push_back(p->optimizer_value());
      ops::ema_update(ema_, weights, cfg_.ema_decay);
    }
    if (cfg_.replicas) {
      region.join();  // the losses and probabilities were written on the side lane
      const Tensor losses = record_.slice0(kErr, kProb + 3);
      if (replica_weight_ != 1.0) ops::scale_inplace(losses, static_cast<float>(replica_weight_));
      cfg_.replicas->all_reduce_mean({losses});
    }
  }
  if (cfg_.policy.fp8_convolutions) {
    region.join();  // every pass's amaxes are in, the side lanes' filter gradients included
    update_fp8_scales();
  }
}

void DcganTrainer::update_fp8_scales() {
  std::vector<Fp8Scaling> states;
  for (nn::Sequential* net : {G_.get(), D_.get()})
    for (auto& [name, s] : net->named_fp8_scalings())
      for (auto [role, state] : s->named()) states.push_back(*state);
  if (cfg_.replicas)
    for (const Fp8Scaling& state : states) cfg_.replicas->all_reduce_max(state.current_amax());
  ops::fp8_update_scales(states, cfg_.policy.fp8_recipe);
}

namespace {
// A TrainerConfig::LaneChoice, Auto resolved by the batch's images x height x width against the
// tuning policy's bound.
bool lanes_wanted(TrainerConfig::LaneChoice choice, const Tensor& real, int64_t max_pixels) {
  using Choice = TrainerConfig::LaneChoice;
  if (choice == Choice::Auto) return real.dim(0) * real.dim(2) * real.dim(3) <= max_pixels;
  return choice == Choice::On;
}
}  // namespace

bool DcganTrainer::use_side_lane(const Tensor& real) const {
  // Its all-reduces would run on both lanes at once over one NCCL communicator, which NCCL does
  // not order.
  if (!cfg_.device.is_cuda() || cfg_.sync_batchnorm) return false;
  return lanes_wanted(cfg_.side_lane, real, tuning().side_lane_max_pixels(cfg_.policy.compute_dtype == DType::F32));
}

bool DcganTrainer::use_fake_branch(const Tensor& real) const {
  if (cfg_.replicas) return false;  // each pass all-reduces its overflow flag: both would at once
  return lanes_wanted(cfg_.fake_branch, real, tuning().fake_branch_max_pixels);
}

bool DcganTrainer::use_side_hold(const Tensor& real) const {
  return lanes_wanted(cfg_.side_hold, real, tuning().side_hold_max_pixels);
}

bool DcganTrainer::use_branch_side_below(const Tensor& real) const {
  return lanes_wanted(cfg_.branch_side_below, real, tuning().branch_side_below_max_pixels);
}

void DcganTrainer::average_grads(nn::Sequential& net) {
  if (!cfg_.replicas) return;
  std::vector<Tensor> grads;
  for (nn::Param* p : net.params()) {
    if (replica_weight_ != 1.0) ops::scale_inplace(p->grad, static_cast<float>(replica_weight_));
    grads.push_back(p->grad);
  }
  cfg_.replicas->all_reduce_mean(grads);
}

bool DcganTrainer::GraphSignature::operator==(const GraphSignature& o) const {
  return real_shape == o.real_shape && noise_shape == o.noise_shape && real_dtype == o.real_dtype &&
         noise_dtype == o.noise_dtype && real_format == o.real_format && noise_format == o.noise_format &&
         bn_updates == o.bn_updates;
}

DcganTrainer::GraphSignature DcganTrainer::signature(const Tensor& real, const Tensor& noise) {
  GraphSignature s;
  s.real_shape = real.shape();
  s.noise_shape = noise.shape();
  s.real_dtype = real.dtype();
  s.noise_dtype = noise.dtype();
  s.real_format = real.format();
  s.noise_format = noise.format();
  for (nn::Sequential* net : {G_.get(), D_.get()})
    for (auto& layer : net->layers())
      if (auto* bn = dynamic_cast<nn::BatchNorm2d*>(layer.get())) s.bn_updates.push_back(bn->update_running_stats());
  return s;
}

std::vector<int64_t*> DcganTrainer::batchnorm_counters() {
  std::vector<int64_t*> out;
  for (nn::Sequential* net : {G_.get(), D_.get()})
    for (auto& kv : net->named_buffers())
      if (kv.second.counter) out.push_back(kv.second.counter);
  return out;
}

void DcganTrainer::bind_graph_inputs(const Tensor& real, const Tensor& noise) {
  if (!cfg_.cuda_graph) fail("bind_graph_inputs: the trainer does not run in CUDA graph mode");
  if (graph_stats_.eager_steps > 0 || graph_stats_.replays > 0)
    fail("bind_graph_inputs: call it before the first step");
  GE_CHECK(real.device() == cfg_.device && noise.device() == cfg_.device, "bind_graph_inputs: real ",
           real.device().str(), " and noise ", noise.device().str(), " must be on the trainer's ", cfg_.device.str());
  bound_real_ = real;
  bound_noise_ = noise;
}

// CUDA graph mode: eager warm-up, one capture, then replays (trainer.h, TrainerConfig::cuda_graph).
void DcganTrainer::graph_step(const Tensor& real_in, const Tensor& noise_in) {
  const GraphSignature sig = signature(real_in, noise_in);
  const bool bound_shapes = bound_real_.defined() && sig == signature(bound_real_, bound_noise_);
  if (bound_shapes && (real_in.data() != bound_real_.data() || noise_in.data() != bound_noise_.data()))
    fail(
        "step(): the CUDA graph reads the real and noise tensors given to bind_graph_inputs in place; this step "
        "passed other tensors of the same shapes (fill the bound ones instead)");
  // The inputs into the graph's buffers, unless they already are those buffers. Stream-ordered:
  // the copies land after the previous replay has read the inputs, and before this one does.
  auto fill_inputs = [&] {
    if (static_real_.data() != real_in.data()) static_real_.copy_from(real_in);
    if (static_noise_.data() != noise_in.data()) static_noise_.copy_from(noise_in);
  };
  auto eager = [&] {
    eager_step(real_in, noise_in);
    ++graph_stats_.eager_steps;
  };

  if (graph_->captured()) {
    if (!(sig == graph_signature_)) {
      eager();  // another batch size (an epoch's last batch): the graph holds only its own shapes
      return;
    }
    fill_inputs();
    ProfileRange range("graph_replay");
    graph_->replay();
    for (size_t i = 0; i < graph_counters_.size(); ++i) *graph_counters_[i] += graph_counter_steps_[i];
    ++graph_stats_.replays;
    return;
  }

  if (!(sig == warm_signature_) || warm_steps_ < cfg_.cuda_graph_warmup) {
    if (sig == warm_signature_) {
      ++warm_steps_;
    } else {
      warm_signature_ = sig;
      warm_steps_ = 1;
      // The input buffers the graph will read are made now, before the warm-up steps: made at
      // capture time they would take cached blocks of the sizes the step itself needs (the real
      // batch has the shape of G's output), and the capture would find none left ("allocation of
      // ... bytes during CUDA graph capture").
      static_real_ =
          bound_shapes ? bound_real_ : Tensor::empty(real_in.shape(), real_in.dtype(), cfg_.device, real_in.format());
      static_noise_ = bound_shapes ? bound_noise_
                                   : Tensor::empty(noise_in.shape(), noise_in.dtype(), cfg_.device, noise_in.format());
    }
    // Warm up through the same buffers the graph will use, so the cache settles on exactly the
    // capture's allocation pattern.
    fill_inputs();
    step_body(static_real_, static_noise_);
    ++graph_stats_.eager_steps;
    return;
  }

  // Capture: the inputs are already in their buffers' shapes; fill them on the stream before
  // the graph's first launch.
  fill_inputs();
  std::vector<int64_t*> counters = batchnorm_counters();
  std::vector<int64_t> before;
  for (int64_t* c : counters) before.push_back(*c);
  try {
    graph_->capture(cfg_.device, [&] { step_body(static_real_, static_noise_); });
  } catch (const Error& e) {
    // Nothing of the captured step ran: undo its host-side counting, and warm up again before
    // another attempt.
    for (size_t i = 0; i < counters.size(); ++i) *counters[i] = before[i];
    warm_steps_ = 0;
    fail("capturing the training step into a CUDA graph failed (run without --cuda-graph to train eagerly): ",
         e.what());
  } catch (...) {
    for (size_t i = 0; i < counters.size(); ++i) *counters[i] = before[i];
    warm_steps_ = 0;
    throw;
  }
  graph_counters_ = counters;
  graph_counter_steps_.clear();
  for (size_t i = 0; i < counters.size(); ++i) graph_counter_steps_.push_back(*counters[i] - before[i]);
  graph_signature_ = sig;
  ++graph_stats_.captures;
  graph_stats_.nodes = graph_->nodes();
  graph_stats_.memsets_hoisted = graph_->memsets_hoisted();
  graph_stats_.roots_joined = graph_->roots_joined();
  graph_->replay();  // the captured step itself: capture records, it does not run
  ++graph_stats_.replays;
}

StepRecord DcganTrainer::record() const {
  const std::vector<double> v = record_.to_doubles();
  float values[kSlots];
  for (int i = 0; i < kSlots; ++i) values[i] = static_cast<float>(v[static_cast<size_t>(i)]);
  return decode_record(values);
}

StepRecord DcganTrainer::decode_record(const float* v) {
  static_assert(kSlots == kRecordValues, "the record's layout changed");
  StepRecord r;
  r.errD_real = v[kErr];
  r.errD_fake = v[kErr + 1];
  r.errG = v[kErr + 2];
  r.D_x = v[kProb];
  r.D_G_z1 = v[kProb + 1];
  r.D_G_z2 = v[kProb + 2];
  for (int i = 0; i < 3; ++i) {
    r.overflow[i] = v[kFound + i] != 0;
    r.scale[i] = v[kScale + i];
  }
  return r;
}

}  // namespace ge
