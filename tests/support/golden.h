// Access to the PyTorch goldens in tests/goldens (written by tools/make_goldens.py).
#pragma once
#include <string>

#include "ganengine/safetensors.h"
#include "support/test_util.h"

namespace ge::test {

// Loads tests/goldens/<name>; a missing golden is a failure (they are committed), not a skip.
const SafeTensorsFile& golden(const std::string& name);
const Tensor& golden_tensor(const SafeTensorsFile& f, const std::string& key);

// The golden tensor converted to dtype/format on device (the inputs of a GPU or half case).
Tensor golden_on(const SafeTensorsFile& f, const std::string& key, Device d, MemoryFormat fmt = MemoryFormat::NCHW,
                 DType dtype = DType::F32);

}  // namespace ge::test
