// How long this process has existed, from the kernel's record of its start: what "process start
// to first training step" is measured against (dynamic loading of cuDNN and cuBLAS included).
#pragma once

namespace ge {
// Seconds since the process started (10 ms resolution), or a negative value where /proc cannot
// tell (not Linux).
double seconds_since_process_start();
}  // namespace ge
