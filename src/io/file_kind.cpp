// Magic numbers: PNG (89 'PNG' 0d 0a 1a 0a), JPEG (ff d8 ff), GIF ('GIF8'), WebP ('RIFF' ....
// 'WEBP'), ZIP ('PK' 03 04), gzip (1f 8b), NumPy (93 'NUMPY'), a pickle of protocol 2 to 5
// (80 02..05), and ONNX, a protobuf ModelProto, which starts with ir_version (field 1, varint:
// 08 and a small number) followed by another of its fields.
#include "io/file_kind.h"

#include <fstream>

namespace ge {
namespace {

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

uint64_t le64(std::string_view s) {
  uint64_t v = 0;
  for (size_t i = 8; i-- > 0;) v = (v << 8) | static_cast<uint8_t>(s[i]);
  return v;
}

// A ZIP local header names its entry at byte 30; torch.save's entries are "<archive>/<record>".
bool zip_entry_looks_like_torch(std::string_view head) {
  if (head.size() < 31) return true;  // too little to tell: a ZIP given for weights is most likely a .pth
  return head.substr(30).find('/') != std::string_view::npos;
}

}  // namespace

FileKind sniff_file_kind(std::string_view head, uint64_t file_size) {
  // A safetensors file: an 8-byte header length that fits in the file, then the JSON's '{'.
  if (head.size() >= 9 && head[8] == '{' && file_size >= 8 && le64(head) <= file_size - 8) return FileKind::Safetensors;
  if (starts_with(head, "\x89PNG\r\n\x1a\n")) return FileKind::Png;
  if (starts_with(head, "\xff\xd8\xff")) return FileKind::Jpeg;
  if (starts_with(head, "GIF8")) return FileKind::Gif;
  if (starts_with(head, "RIFF") && head.size() >= 12 && head.substr(8, 4) == "WEBP") return FileKind::Webp;
  if (starts_with(head, std::string_view("PK\x03\x04", 4)))
    return zip_entry_looks_like_torch(head) ? FileKind::PthZip : FileKind::Zip;
  if (starts_with(head, "\x1f\x8b")) return FileKind::Gzip;
  if (starts_with(head, "\x93NUMPY")) return FileKind::Numpy;
  if (head.size() >= 2 && static_cast<uint8_t>(head[0]) == 0x80 && head[1] >= 2 && head[1] <= 5)
    return FileKind::PthLegacy;
  // ONNX: ir_version 3..15, then a string or message field (producer_name 2, graph 7, opset 8, ...).
  if (head.size() >= 3 && head[0] == 0x08 && head[1] >= 3 && head[1] <= 15 && (head[2] & 7) == 2 &&
      (static_cast<uint8_t>(head[2]) >> 3) >= 2 && (static_cast<uint8_t>(head[2]) >> 3) <= 8)
    return FileKind::Onnx;
  return FileKind::Unknown;
}

FileKind sniff_file_kind(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return FileKind::Unknown;
  const auto size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  std::string head(kFileKindHeadBytes < size ? kFileKindHeadBytes : size, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  if (!in) return FileKind::Unknown;
  // torch.save's first entry name needs more than the usual head: read up to a ZIP name's length.
  if (starts_with(head, std::string_view("PK\x03\x04", 4)) && size > head.size()) {
    head.resize(size < 128 ? size : 128);
    in.clear();
    in.seekg(0);
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
  }
  return sniff_file_kind(head, size);
}

const char* file_kind_description(FileKind kind) {
  switch (kind) {
    case FileKind::Unknown: return "a file of unknown kind";
    case FileKind::Safetensors: return "a safetensors file";
    case FileKind::Png: return "a PNG image";
    case FileKind::Jpeg: return "a JPEG image";
    case FileKind::Gif: return "a GIF image";
    case FileKind::Webp: return "a WebP image";
    case FileKind::PthZip: return "a PyTorch .pth file (torch.save's ZIP format)";
    case FileKind::PthLegacy: return "a PyTorch .pth file (torch.save's legacy pickle format) or another pickle";
    case FileKind::Zip: return "a ZIP archive";
    case FileKind::Gzip: return "a gzip-compressed file";
    case FileKind::Numpy: return "a NumPy .npy array";
    case FileKind::Onnx: return "an ONNX model";
  }
  return "a file";
}

std::string not_safetensors_message(const std::string& path, FileKind kind) {
  std::string what = path + " is " + file_kind_description(kind) + ", not a safetensors file: ";
  switch (kind) {
    case FileKind::Unknown:
    case FileKind::Safetensors: return {};
    case FileKind::Png:
    case FileKind::Jpeg:
    case FileKind::Gif:
    case FileKind::Webp: return what + "expected tensors (weights or noise) written by ganengine or safetensors";
    case FileKind::PthZip:
    case FileKind::PthLegacy:
      return what + "--netG and --netD (train, generate, export) read a state_dict .pth as it is; elsewhere convert " +
             "it first with 'ganengine convert " + path + " OUT.safetensors'";
    case FileKind::Zip: return what + "unpack it and give the safetensors file inside";
    case FileKind::Gzip: return what + "decompress it first (gunzip)";
    case FileKind::Numpy: return what + "save the array with safetensors (safetensors.numpy.save_file) instead";
    case FileKind::Onnx:
      return what + "an ONNX model holds a graph for inference; ganengine reads weights as safetensors";
  }
  return {};
}

}  // namespace ge
