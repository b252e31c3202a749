// libFuzzer target: tests/fuzz/fuzz_readers.cpp's "pth" reader (tools/fuzz.sh runs it).
#include "fuzz/fuzz_one.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return ge::fuzz::fuzz_one("pth", data, size);
}
