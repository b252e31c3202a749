#include "train/run_record.h"

#include <chrono>

#include "core/backend.h"
#include "ganengine/system_info.h"
#include "io/atomic_file.h"
#include "io/json.h"
#include "runtime/gpu_measure.h"

#ifndef GE_GIT_COMMIT
#define GE_GIT_COMMIT "unknown"
#endif

namespace ge {

const char* build_git_commit() { return GE_GIT_COMMIT; }

namespace {

json::Value strings(const std::vector<std::string>& lines) {
  json::Value a = json::Value::array();
  for (const auto& l : lines) a.push_back(json::Value::string(l));
  return a;
}

json::Value gpu_facts(Device d) {
  if (!d.is_cuda()) return {};
  const DeviceFacts f = device_facts(d);
  json::Value g = json::Value::object();
  g.append_member("name", json::Value::string(f.name));
  g.append_member("compute_capability", json::Value::string(f.compute_capability));
  g.append_member("sm_count", json::Value::integer(f.sm_count));
  g.append_member("driver", json::Value::string(f.driver));
  g.append_member("driver_cuda", json::Value::string(f.driver_cuda));
  g.append_member("cuda_runtime", json::Value::string(f.cuda_runtime));
  g.append_member("cudnn", json::Value::string(f.cudnn));
  g.append_member("cublas", json::Value::string(f.cublas));
  return g;
}

}  // namespace

std::string run_json(const TrainOptions& opt, const RunFacts& facts) {
  using json::Value;
  Value doc = Value::object();
  doc.append_member("program", Value::string("ganengine train"));
  doc.append_member("version", Value::string(opt.version));
  doc.append_member("git_commit", Value::string(build_git_commit()));
  doc.append_member(
      "started",
      Value::number(std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count()));
  Value flags = Value::object();
  for (const auto& [name, value] : opt.flag_values) flags.append_member(name, Value::string(value));
  doc.append_member("flags", flags);

  Value resolved = Value::object();
  resolved.append_member("device", Value::string(opt.device.str()));
  resolved.append_member("cuda_graph", Value::boolean(opt.cuda_graph));
  resolved.append_member("world", Value::integer(facts.world));
  resolved.append_member("dataset", Value::string(facts.dataset));
  resolved.append_member("dataset_images", Value::integer(facts.dataset_images));
  resolved.append_member("batches_per_epoch", Value::integer(facts.batches_per_epoch));
  resolved.append_member("start_step", Value::integer(facts.start_step));
  resolved.append_member("stop_step", Value::integer(facts.stop_step));
  resolved.append_member("resumed", Value::boolean(facts.resumed));
  resolved.append_member("lr_G", Value::number(opt.lr));
  resolved.append_member("lr_D", Value::number(opt.lr));
  resolved.append_member("ema_decay", Value::number(opt.ema_decay));
  resolved.append_member("tensorboard", Value::boolean(opt.tensorboard));
  doc.append_member("resolved", resolved);

  Value policy = Value::object();
  policy.append_member("opt_level", Value::string(opt_level_name(facts.policy.level)));
  policy.append_member("half", Value::string(dtype_name(facts.policy.half)));
  policy.append_member("weight_dtype", Value::string(dtype_name(facts.policy.weight_dtype)));
  policy.append_member("bn_param_dtype", Value::string(dtype_name(facts.policy.bn_param_dtype)));
  policy.append_member("compute_dtype", Value::string(dtype_name(facts.policy.compute_dtype)));
  policy.append_member("master_weights", Value::boolean(facts.policy.master_weights));
  policy.append_member("dynamic_loss_scale", Value::boolean(facts.policy.dynamic_loss_scale));
  policy.append_member("initial_loss_scale", Value::number(facts.policy.initial_loss_scale));
  policy.append_member("min_loss_scale", Value::number(facts.policy.min_loss_scale));
  policy.append_member("allow_tf32", Value::boolean(facts.policy.allow_tf32));
  policy.append_member("describe", strings(facts.policy.describe()));
  doc.append_member("precision_policy", policy);

  doc.append_member("gpu", gpu_facts(opt.device));
  doc.append_member("system", strings(system_info_lines()));
  return json::write(doc) + "\n";
}

void write_run_json(const std::string& path, const TrainOptions& opt, const RunFacts& facts) {
  write_file_atomically(path, run_json(opt, facts));
}

}  // namespace ge
