// What a file is, from its first bytes: so that a PNG, a .pth or a gzip given where a
// safetensors file is expected gets a message that names what it is and what to do, not a
// "header length 727905341920923785" parse error, and so that --netG can take a .pth as well.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace ge {

enum class FileKind { Unknown, Safetensors, Png, Jpeg, Gif, Webp, PthZip, PthLegacy, Zip, Gzip, Numpy, Onnx };

// The bytes needed to tell the kinds apart.
constexpr size_t kFileKindHeadBytes = 16;

// `head`: the file's first bytes (up to kFileKindHeadBytes); `file_size`: the whole file's size,
// against which a safetensors header length must fit. A ZIP is taken for a .pth (PthZip) when
// its first entry is named "<name>/data.pkl" or "<name>/...", as torch.save names them.
FileKind sniff_file_kind(std::string_view head, uint64_t file_size);
FileKind sniff_file_kind(const std::string& path);  // Unknown when the file cannot be read

// "a PNG image", "a PyTorch .pth file (torch.save's ZIP format)", ...
const char* file_kind_description(FileKind kind);

// For a file of `kind` given where a safetensors file was expected: "<path> is <what>, not a
// safetensors file: <what to do>". Empty for Unknown and Safetensors.
std::string not_safetensors_message(const std::string& path, FileKind kind);

}  // namespace ge
