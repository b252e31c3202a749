#include "core/process_clock.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace ge {

double seconds_since_process_start() {
  // Field 22 of /proc/self/stat is the start time in clock ticks after boot; /proc/uptime is
  // now, in seconds after boot. The command name (field 2) may hold spaces: skip past its ')'.
  std::ifstream stat("/proc/self/stat");
  std::string line;
  if (!std::getline(stat, line)) return -1;
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream fields(line.substr(close + 2));
  std::string field;
  unsigned long long start_ticks = 0;
  for (int i = 3; i <= 22 && fields >> field; ++i)
    if (i == 22) start_ticks = std::stoull(field);
  std::ifstream uptime_file("/proc/uptime");
  double uptime = 0;
  const long ticks_per_s = sysconf(_SC_CLK_TCK);
  if (!(uptime_file >> uptime) || start_ticks == 0 || ticks_per_s <= 0) return -1;
  return uptime - static_cast<double>(start_ticks) / static_cast<double>(ticks_per_s);
}

}  // namespace ge
