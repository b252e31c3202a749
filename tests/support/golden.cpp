#include "support/golden.h"

#include <map>
#include <memory>

#include "ganengine/ops.h"

namespace ge::test {

const SafeTensorsFile& golden(const std::string& name) {
  static std::map<std::string, std::unique_ptr<SafeTensorsFile>> cache;
  auto& slot = cache[name];
  if (!slot) slot = std::make_unique<SafeTensorsFile>(load_safetensors(data_path(name)));
  return *slot;
}

const Tensor& golden_tensor(const SafeTensorsFile& f, const std::string& key) {
  auto it = f.tensors.find(key);
  if (it == f.tensors.end()) fail("golden key '", key, "' missing: regenerate with tools/make_goldens.py");
  return it->second;
}

Tensor golden_on(const SafeTensorsFile& f, const std::string& key, Device d, MemoryFormat fmt, DType dtype) {
  return ops::converted(golden_tensor(f, key), dtype, fmt, d);
}

}  // namespace ge::test
