#include "train/logged_step.h"

#include <cstdio>

namespace ge {

std::string metrics_record(const LoggedStep& s) {
  const StepRecord& r = s.record;
  char buf[800];
  std::snprintf(buf, sizeof buf,
                "{\"step\": %lld, \"epoch\": %lld, \"iter\": %lld, \"loss_D\": %.9g, \"loss_G\": %.9g, "
                "\"errD_real\": %.9g, \"errD_fake\": %.9g, \"D_x\": %.9g, \"D_G_z1\": %.9g, \"D_G_z2\": %.9g, "
                "\"loss_scale\": [%.9g, %.9g, %.9g], \"overflow\": [%d, %d, %d], \"images_per_s\": %.1f, "
                "\"lr_G\": %.9g, \"lr_D\": %.9g, \"time\": %.6f, \"elapsed_s\": %.6f}",
                static_cast<long long>(s.step), static_cast<long long>(s.epoch), static_cast<long long>(s.iteration),
                r.errD_real + r.errD_fake, r.errG, r.errD_real, r.errD_fake, r.D_x, r.D_G_z1, r.D_G_z2, r.scale[0],
                r.scale[1], r.scale[2], r.overflow[0], r.overflow[1], r.overflow[2], s.images_per_s, s.lr_G, s.lr_D,
                s.wall_time, s.elapsed_s);
  return buf;
}

std::vector<std::pair<std::string, float>> tensorboard_scalars(const LoggedStep& s) {
  const StepRecord& r = s.record;
  static const char* const kLoss[3] = {"errD_real", "errD_fake", "errG"};
  std::vector<std::pair<std::string, float>> v = {
      {"Loss_D", r.errD_real + r.errD_fake},
      {"Loss_G", r.errG},
      {"errD_real", r.errD_real},
      {"errD_fake", r.errD_fake},
      {"D_x", r.D_x},
      {"D_G_z1", r.D_G_z1},
      {"D_G_z2", r.D_G_z2},
  };
  for (int i = 0; i < 3; ++i) v.emplace_back(std::string("loss_scale/") + kLoss[i], r.scale[i]);
  for (int i = 0; i < 3; ++i) v.emplace_back(std::string("overflow/") + kLoss[i], r.overflow[i] ? 1.f : 0.f);
  v.emplace_back("images_per_s", static_cast<float>(s.images_per_s));
  v.emplace_back("lr/G", static_cast<float>(s.lr_G));
  v.emplace_back("lr/D", static_cast<float>(s.lr_D));
  return v;
}

}  // namespace ge
