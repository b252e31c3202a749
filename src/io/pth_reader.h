// Reading the state_dicts that PyTorch's torch.save writes (the .pth files of the PyTorch and
// Apex DCGAN examples: torch.save(netG.state_dict(), 'netG_epoch_24.pth')), without Python.
//
// Two container formats:
//  - the ZIP format (torch.save's default since PyTorch 1.6): "<name>/data.pkl" is the pickled
//    state_dict, each tensor's storage a persistent id ('storage', torch.FloatStorage, key,
//    location, numel) whose bytes are the entry "<name>/data/<key>", little-endian;
//  - the legacy format (_use_new_zipfile_serialization=False): five pickles in a row (magic
//    number, protocol version 1001, system info, the state_dict, the list of storage keys),
//    then each storage as an int64 element count and its bytes, in the keys' order.
// The state_dict is an OrderedDict (or dict) from names to tensors rebuilt by
// torch._utils._rebuild_tensor_v2 (or _rebuild_tensor, or _rebuild_parameter around one).
// Storages of f32, f64, f16, bf16, i64 and u8 are read; strided views are gathered.
#pragma once
#include <map>
#include <string>
#include <string_view>

#include "ganengine/tensor.h"

namespace ge {

// CPU tensors, contiguous, by state_dict name. Throws ge::Error naming the file and what was
// wrong: not a torch.save file, a pickle that is not a state_dict (a whole pickled model, say),
// a dtype we do not read, or a truncated or corrupt file.
std::map<std::string, Tensor> load_pth_state_dict(const std::string& path);
// The same, from the file's bytes; `what` names them in errors.
std::map<std::string, Tensor> parse_pth_state_dict(std::string_view bytes, const std::string& what);

}  // namespace ge
