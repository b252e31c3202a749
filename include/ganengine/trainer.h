// The DCGAN training step of Apex's main_amp.py, with Apex AMP semantics: three losses, one
// loss scaler each, two Adam optimizers. Everything a step decides (overflow, skip, new scale)
// is decided on the device; the host only reads the record of a step when it wants to log.
#pragma once
#include <array>
#include <memory>
#include <optional>
#include <vector>

#include "ganengine/amp.h"
#include "ganengine/cuda_graph.h"
#include "ganengine/nn.h"
#include "ganengine/optim.h"
#include "ganengine/replica_group.h"

namespace ge {

struct TrainerConfig {
  nn::NetConfig net;
  PrecisionPolicy policy;
  Device device = Device::cpu();
  uint64_t seed = 2809;
  double lr = 2e-4;
  double beta1 = 0.5;
  // Run the whole step (three losses, both backward passes, unscale and finite checks, the
  // loss-scaler updates, both Adam steps, the record) as one CUDA graph. GPU only; off by default.
  // The first cuda_graph_warmup steps of an input shape run eagerly (cuDNN algorithm searches,
  // workspace growth and the allocator's cache settle there); the next step of that shape is
  // captured and launched, and every later step with the same shapes, dtypes and layouts of
  // real and noise only copies its inputs into the graph's own input buffers (no copy for
  // inputs bound with bind_graph_inputs) and replays it.
  // Steps of any other shape (the last, partial batch of an epoch) run eagerly, before or after
  // the capture, with the same results; the graph is never re-captured. The same happens while
  // any BatchNorm2d has its running-statistics updates switched off. force_overflow_next_step
  // is rejected in this mode.
  bool cuda_graph = false;
  int cuda_graph_warmup = 3;  // at least 2: the capture must see the steady-state allocation pattern
  // GPU: run the parts of a step that do not depend on each other side by side on more streams
  // (concurrent_region.h): G's forward beside D's pass on the real batch, and each filter
  // gradient beside the rest of its backward pass. Same results bit for bit; never with --sync-bn.
  // Each lane setting below is On, Off, or Auto: on while the real batch has at most the tuning
  // policy's bound of images x height x width (src/core/tuning_policy.h).
  enum class LaneChoice { Auto, On, Off };
  LaneChoice side_lane = LaneChoice::Auto;
  // With the side lane: D's whole pass on the fake batch (G's forward, D's forward and backward
  // on a twin of D, Sequential::twin) beside its pass on the real batch, instead of after it; the
  // fake loss's gradients are added to the real loss's after those, and the BatchNorm running
  // statistics are updated in the example's order, so the results stay the same bit for bit.
  // Never with replicas (both passes' all-reduces would run at once).
  LaneChoice fake_branch = LaneChoice::Auto;
  // With the side lane: what each filter gradient reads stays held until its backward pass ends
  // (ConcurrentRegion::hold_kept_until_join) instead of the main lane waiting for the side lane's
  // previous filter gradient before handing it the next one, which put each side-lane filter
  // gradient on the main lane's chain. Same results bit for bit; holds more memory.
  LaneChoice side_hold = LaneChoice::Auto;
  // With the fake branch: the branch lane's side lane (its filter gradients) one stream priority
  // below the branch lane, so that the branch's own chain (D's pass on the fake batch, whose
  // first layer's filter gradient ends it) takes free SMs first. Same results bit for bit.
  LaneChoice branch_side_below = LaneChoice::Auto;
  // With a static loss scale (O0, O3) and one replica, each optimizer unscales its last loss's
  // gradients itself as its update reads them (ops::PendingGrads) instead of a separate pass
  // before it: nothing decides on the overflow flag in between. The same steps bit for bit; the
  // last loss's part is then not written into Param::grad.
  bool optimizer_unscales_last_loss = true;
  // Data parallelism (not owned; null: a single replica). This trainer is one replica: step()
  // takes its share of the global batch; the group averages the f32 gradients before each
  // optimizer step (the mean of the replicas' gradients, as DataParallel's summed gradient of a
  // mean loss), combines each loss's overflow flag (max) before its scaler update, and averages
  // the losses and probabilities of the record. BatchNorm statistics stay per replica.
  ReplicaGroup* replicas = nullptr;
  // With replicas: every BatchNorm2d takes its batch statistics over all replicas (--sync-bn).
  bool sync_batchnorm = false;
  // In (0, 1): an exponential moving average of G's weights (the fp32 masters where the policy
  // keeps them, else the weights), updated after every G step inside the step (ops::ema_update,
  // so a captured step carries it): average = decay * average + (1 - decay) * weight. 0: none.
  // A step whose G update an overflow skipped updates it too, towards the unchanged weights, as
  // PyTorch's loops do: the decision stays on the device.
  double ema_decay = 0;
};

// The losses of the example's three backward passes.
enum LossId { kLossDReal = 0, kLossDFake = 1, kLossG = 2 };

struct StepRecord {
  float errD_real = 0, errD_fake = 0, errG = 0;
  float D_x = 0, D_G_z1 = 0, D_G_z2 = 0;  // mean probabilities
  std::array<bool, 3> overflow{};         // found a non-finite gradient in loss i
  std::array<float, 3> scale{};           // loss scales after this step's update
  bool skipped_D() const { return overflow[0] || overflow[1]; }
};

class DcganTrainer {
 public:
  explicit DcganTrainer(const TrainerConfig& cfg);

  // One iteration. real: (N, nc, S, S) f32 in [-1, 1], any device; noise: (N, nz, 1, 1).
  void step(const Tensor& real, const Tensor& noise);
  // TrainerConfig::replicas: this replica's share of a batch that did not split evenly, times the
  // number of replicas (1 for an even split); its gradients and losses are weighted by it.
  void set_replica_weight(double w) { replica_weight_ = w; }
  // The latest step's losses, probabilities, overflows and scales (waits for the device).
  StepRecord record() const;
  // The same without waiting: the device tensor the step writes its record into (f32, 12
  // values), to copy out asynchronously, and the decoding of those 12 values.
  const Tensor& record_tensor() const { return record_; }
  static constexpr int kRecordValues = 12;
  static StepRecord decode_record(const float* values);
  // Test hook: the next step() puts an inf into loss `id`'s gradients, as a real overflow would.
  // Throws with TrainerConfig::cuda_graph (a replayed graph cannot take host-side decisions).
  void force_overflow_next_step(LossId id);

  // CUDA graph mode: the caller promises to pass exactly these two device tensors (the same
  // storage, refilled by the caller between steps on the device's stream) to every step() of
  // their shapes, so the graph reads them in place instead of copying them into buffers of its
  // own: one batch less in memory and two copies less per step. step() then rejects other
  // tensors of those shapes; batches of other shapes still run eagerly. Before the first step.
  void bind_graph_inputs(const Tensor& real, const Tensor& noise);

  // What the CUDA graph mode did so far (all zero without TrainerConfig::cuda_graph).
  struct GraphStats {
    int64_t eager_steps = 0;     // warm-up steps and steps of another shape
    int64_t captures = 0;        // 0 or 1
    int64_t replays = 0;         // graph launches, the one right after the capture included
    size_t nodes = 0;            // nodes of the captured graph
    size_t memsets_hoisted = 0;  // cuDNN workspace memsets moved off BatchNorm chains (CudaGraph)
    size_t roots_joined = 0;     // graph roots made to wait for its root of highest priority (CudaGraph)
  };
  const GraphStats& graph_stats() const { return graph_stats_; }

  nn::Sequential& generator() { return *G_; }
  nn::Sequential& discriminator() { return *D_; }
  Adam& optimizer_G() { return *optG_; }
  Adam& optimizer_D() { return *optD_; }
  // TrainerConfig::ema_decay: the averages of G's params() in their order (f32, each shaped and
  // laid out as its weight), empty when off. restart_ema sets them to G's weights as they are
  // now (the constructor does; so does `train` after loading --netG).
  std::vector<Tensor>& generator_ema() { return ema_; }
  void restart_ema();
  // Loss scaler i's state: f32 (2) = {scale, clean steps}.
  Tensor& scaler_state(int i) { return scaler_[i]; }
  const TrainerConfig& config() const { return cfg_; }
  const nn::Placement& placement() const { return where_; }

 private:
  // d: D, or its twin for the fake batch's pass on the branch lane; the unscaled gradients are
  // added after `accumulate_after` (the real loss's, on the other lane).
  void scaled_backward(nn::Sequential& d, const Tensor& logits, float target, LossId id, bool accumulate,
                       ConcurrentRegion::Mark accumulate_after = {});
  // The step itself on device tensors: what eager mode runs and what the CUDA graph captures.
  void eager_step(const Tensor& real_in, const Tensor& noise_in);  // inputs moved to the device, then step_body
  void step_body(const Tensor& real, const Tensor& noise);
  void average_grads(nn::Sequential& net);  // TrainerConfig::replicas: mean of the f32 gradients
  // O4: the delayed-scaling step of every FP8 convolution's three states, after every pass of
  // the step has folded its amaxes in (with replicas, first their maximum over the replicas, so
  // that every replica keeps the same scales). A step an overflow skipped rolls the histories too,
  // as Transformer Engine's does: its non-finite amax keeps the scales for the history's length.
  void update_fp8_scales();
  // Whether the optimizer of `params` takes its last loss's gradients still scaled
  // (TrainerConfig::optimizer_unscales_last_loss, and model gradients in the optimizer's dtype).
  bool optimizer_unscales(const std::vector<nn::Param*>& params) const;
  // fn's device work on the calling lane's side lane while a concurrent region is open, else
  // in place.
  void on_side_lane(const std::function<void()>& fn);
  bool use_side_lane(const Tensor& real) const;          // TrainerConfig::side_lane for this batch
  bool use_fake_branch(const Tensor& real) const;        // TrainerConfig::fake_branch, with the side lane
  bool use_side_hold(const Tensor& real) const;          // TrainerConfig::side_hold, with the side lane
  bool use_branch_side_below(const Tensor& real) const;  // TrainerConfig::branch_side_below
  void graph_step(const Tensor& real, const Tensor& noise);
  // What must not change between capture and replay: the inputs' shapes, dtypes and layouts,
  // and which BatchNorm2d layers update their running statistics.
  struct GraphSignature {
    Shape real_shape, noise_shape;
    DType real_dtype = DType::F32, noise_dtype = DType::F32;
    MemoryFormat real_format = MemoryFormat::NCHW, noise_format = MemoryFormat::NCHW;
    std::vector<bool> bn_updates;
    bool operator==(const GraphSignature& o) const;
  };
  GraphSignature signature(const Tensor& real, const Tensor& noise);
  std::vector<int64_t*> batchnorm_counters();
  TrainerConfig cfg_;
  nn::Placement where_;
  std::unique_ptr<nn::Sequential> G_, D_;
  std::unique_ptr<Adam> optG_, optD_;
  std::array<Tensor, 3> scaler_;
  Tensor record_;            // f32 (12) on the device, read by record()
  Tensor no_skip_;           // f32 (1) zero: static loss scales never skip a step (Apex)
  std::vector<Tensor> ema_;  // generator_ema()
  std::array<bool, 3> forced_{};
  // D's and G's last loss's gradients left for their optimizer to unscale (optimizer_unscales).
  std::array<std::optional<ops::PendingGrads>, 2> pending_;
  double replica_weight_ = 1.0;
  ops::ScalerConfig scaler_cfg_;
  // CUDA graph mode (TrainerConfig::cuda_graph).
  GraphStats graph_stats_;
  GraphSignature warm_signature_, graph_signature_;
  int warm_steps_ = 0;                 // consecutive eager steps with warm_signature_
  Tensor static_real_, static_noise_;  // the graph's inputs: fixed addresses
  Tensor bound_real_, bound_noise_;    // bind_graph_inputs: the caller's, used as the graph's inputs
  // num_batches_tracked is host state: a replay adds what one captured step added.
  std::vector<int64_t*> graph_counters_;
  std::vector<int64_t> graph_counter_steps_;
  std::unique_ptr<CudaGraph> graph_;  // last member: destroyed first, while the rest still lives
};

}  // namespace ge
