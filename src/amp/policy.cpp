// Apex's opt-level table (apex/amp/frontend.py), with its overrides, as one resolved policy.
#include <cstdlib>
#include <sstream>

#include "ganengine/amp.h"
#include "ganengine/error.h"

namespace ge {

OptLevel parse_opt_level(const std::string& s) {
  if (s == "O0") return OptLevel::O0;
  if (s == "O1") return OptLevel::O1;
  if (s == "O2") return OptLevel::O2;
  if (s == "O3") return OptLevel::O3;
  if (s == "O4") return OptLevel::O4;
  fail("unknown opt level '", s, "' (expected O0, O1, O2, O3 or O4; the letter O, not zero)");
}

const char* opt_level_name(OptLevel l) {
  switch (l) {
    case OptLevel::O0: return "O0";
    case OptLevel::O1: return "O1";
    case OptLevel::O2: return "O2";
    case OptLevel::O3: return "O3";
    case OptLevel::O4: return "O4";
  }
  return "?";
}

PrecisionPolicy resolve_policy(OptLevel level, const AmpOverrides& o) {
  if (o.half != DType::F16 && o.half != DType::BF16) fail("--half must be fp16 or bf16");
  PrecisionPolicy p;
  p.level = level;
  p.half = o.half;
  p.min_loss_scale = o.min_loss_scale;
  bool keep_bn_fp32 = true;
  switch (level) {
    case OptLevel::O0:  // pure fp32, and true fp32: no TF32 unless asked
      p.weight_dtype = p.compute_dtype = DType::F32;
      p.dynamic_loss_scale = false;
      break;
    case OptLevel::O1:  // fp32 weights, convolutions cast to half on the fly
      p.weight_dtype = DType::F32;
      p.compute_dtype = o.half;
      p.dynamic_loss_scale = true;
      break;
    case OptLevel::O4:  // O2, with the convolutions' operands in FP8
      p.fp8_convolutions = true;
      [[fallthrough]];
    case OptLevel::O2:  // half model, fp32 BatchNorm, fp32 master weights in the optimizer
      p.weight_dtype = p.compute_dtype = o.half;
      p.master_weights = true;
      p.dynamic_loss_scale = true;
      break;
    case OptLevel::O3:  // pure half, BatchNorm too: the speed ceiling
      p.weight_dtype = p.compute_dtype = o.half;
      keep_bn_fp32 = false;
      p.dynamic_loss_scale = false;
      break;
  }
  // bf16 has fp32's range: Apex-style recipes run it without loss scaling.
  if (o.half == DType::BF16) p.dynamic_loss_scale = false;
  if (o.keep_batchnorm_fp32) {
    if (level == OptLevel::O0 && !*o.keep_batchnorm_fp32) fail("--keep-batchnorm-fp32 False makes no sense at O0");
    keep_bn_fp32 = *o.keep_batchnorm_fp32;
  }
  p.bn_param_dtype = (level == OptLevel::O0 || level == OptLevel::O1 || keep_bn_fp32) ? DType::F32 : o.half;
  // fp32 weights are their own masters, so the override only matters for half weights.
  if (o.master_weights) p.master_weights = *o.master_weights && p.weight_dtype != DType::F32;
  if (o.loss_scale) {
    if (*o.loss_scale == "dynamic") {
      p.dynamic_loss_scale = true;
    } else {
      char* end = nullptr;
      double v = std::strtod(o.loss_scale->c_str(), &end);
      if (end == o.loss_scale->c_str() || *end != '\0' || !(v > 0) || v > 3.4e38)
        fail("--loss-scale '", *o.loss_scale, "' (expected 'dynamic' or a positive number such as 128)");
      p.dynamic_loss_scale = false;
      p.static_loss_scale = static_cast<float>(v);
    }
  }
  p.initial_loss_scale = p.dynamic_loss_scale ? 65536.0f : p.static_loss_scale;
  p.allow_tf32 = o.allow_tf32;
  return p;
}

std::vector<std::string> PrecisionPolicy::describe() const {
  std::vector<std::string> out;
  auto add = [&](const std::string& k, const std::string& v) { out.push_back(k + ": " + v); };
  add("opt_level", opt_level_name(level));
  add("half type", dtype_name(half));
  add("conv weights stored as", dtype_name(weight_dtype));
  add("conv compute / activations", dtype_name(compute_dtype));
  add("batchnorm params", dtype_name(bn_param_dtype));
  add("batchnorm statistics", "f32");
  add("loss (BCEWithLogits)", "f32");
  add("master weights", master_weights ? "f32 copies in the optimizer"
                                       : (weight_dtype == DType::F32 ? "none (weights are f32)" : "none"));
  std::ostringstream ls;
  if (dynamic_loss_scale)
    ls << "dynamic, one scaler per loss (start 65536, x2 every 2000 clean steps, x0.5 on overflow, max 2^24, min "
       << min_loss_scale << ")";
  else
    ls << static_loss_scale << " static";
  add("loss scale", ls.str());
  add("tf32", allow_tf32 ? "allowed for f32 convolutions" : "off");
  if (fp8_convolutions) {
    std::ostringstream fp8;
    fp8 << "E4M3 activations and weights, E5M2 output gradients, f32 accumulation, in every convolution with at "
           "least 8 channels on each side (the image layers and D's 1-channel head stay "
        << dtype_name(half) << "); delayed scaling per tensor: amax history " << fp8_recipe.amax_history_len
        << ", margin " << fp8_recipe.margin
        << ", scale = FP8 max / max of the history; emulated: each operand rounded to FP8 and back to "
        << dtype_name(half) << " ahead of the convolution in " << dtype_name(half);
    add("fp8 convolutions", fp8.str());
  }
  return out;
}

}  // namespace ge
