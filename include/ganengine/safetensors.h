// Reading and writing the safetensors format (https://github.com/huggingface/safetensors), the
// file format of our checkpoints, so that PyTorch's `safetensors.torch.load_file` reads what we
// write and we read what it writes.
//
// Layout: 8-byte little-endian header length n; n bytes of JSON
//   {"__metadata__": {"key": "value", ...},
//    "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
// padded with spaces to a multiple of 8; then the data buffer, offsets relative to its start.
// Tensors are row-major (4-D ones in NCHW, PyTorch's logical order).
#pragma once
#include <map>
#include <string>

#include "ganengine/tensor.h"

namespace ge {

struct SafeTensorsFile {
  std::map<std::string, Tensor> tensors;  // CPU, row-major / NCHW
  std::map<std::string, std::string> metadata;
};

// Reads and validates the whole file. Any problem (missing file, truncation, bad JSON, unknown
// dtype, inconsistent shape or offsets) throws ge::Error naming the file and what was expected.
SafeTensorsFile load_safetensors(const std::string& path);

// Writes tensors (any device, any memory format; stored as CPU NCHW bytes), sorted by name.
// The file appears atomically: it is written to "<path>.tmp.<pid>", flushed to disk and renamed
// over path, so a failure leaves an existing file untouched and no temporary behind.
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// The format's dtype names ("F32", "F16", "BF16", "U8", "I64", "F64"); the parser throws
// ge::Error on other names.
const char* safetensors_dtype_name(DType t);
DType safetensors_dtype_from_name(const std::string& name);

// The largest header we accept, as the reference implementation does: anything bigger is not
// a safetensors file (or a corrupt one) and must not make us allocate gigabytes.
constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

}  // namespace ge
