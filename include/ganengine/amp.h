// Opt levels: Apex's O0-O3, and O4 (O2 with FP8 convolutions), resolved into one table of
// properties that every layer consults. Layers never decide precision themselves; they ask the policy.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ganengine/dtype.h"
#include "ganengine/fp8.h"

namespace ge {

enum class OptLevel { O0, O1, O2, O3, O4 };
OptLevel parse_opt_level(const std::string& s);  // "O0".."O4"; throws ge::Error naming the choices
const char* opt_level_name(OptLevel l);

// What the user may override on top of an opt level (Apex's keyword arguments).
struct AmpOverrides {
  std::optional<bool> keep_batchnorm_fp32;
  std::optional<bool> master_weights;
  std::optional<std::string> loss_scale;      // "dynamic" or a number
  DType half = DType::F16;                    // --half fp16|bf16
  bool allow_tf32 = false;                    // --tf32: lets O0's fp32 convolutions use TF32
  float min_loss_scale = 1.52587890625e-05f;  // 2^-16
};

struct PrecisionPolicy {
  OptLevel level = OptLevel::O0;
  DType half = DType::F16;          // what "half" means: f16, or bf16 with --half bf16
  DType weight_dtype = DType::F32;  // model weights of convolutions as stored
  DType bn_param_dtype = DType::F32;
  DType compute_dtype = DType::F32;  // convolutions, and the activations flowing between layers
  bool master_weights = false;       // fp32 master copies live in the optimizer
  bool dynamic_loss_scale = false;
  float static_loss_scale = 1.0f;
  float initial_loss_scale = 1.0f;
  float min_loss_scale = 1.52587890625e-05f;
  bool allow_tf32 = false;
  // O4: the convolutions read their activations and weights as E4M3 and their output gradients
  // as E5M2, each tensor scaled by Transformer Engine's delayed-scaling recipe (Conv2d::fp8).
  bool fp8_convolutions = false;
  Fp8DelayedScaling fp8_recipe;

  // Lines like "cast_model_type: f16" describing the resolved table, for logs and --print-precision.
  std::vector<std::string> describe() const;
};

PrecisionPolicy resolve_policy(OptLevel level, const AmpOverrides& overrides = {});

}  // namespace ge
