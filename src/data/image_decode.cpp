// decode_image / probe_image: read the file, recognise its format by the magic bytes, hand it
// to that format's codec (image_decode_*.cpp).
#include "data/image_decode.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "data/image_codecs.h"

namespace ge {

const char* image_format_name(ImageFormat format) {
  switch (format) {
    case ImageFormat::jpeg: return "JPEG";
    case ImageFormat::png: return "PNG";
    case ImageFormat::gif: return "GIF";
    case ImageFormat::bmp: return "BMP";
    case ImageFormat::pnm: return "PPM/PGM";
    case ImageFormat::webp: return "WebP";
    case ImageFormat::tiff: return "TIFF";
    case ImageFormat::tga: return "TGA";
  }
  return "?";
}

namespace codecs {

void check_dimensions(const ImageBytes& in, ImageFormat format, int64_t width, int64_t height) {
  if (width < 1 || height < 1)
    fail_image(in, image_format_name(format), " header gives an empty size ", width, " x ", height);
  if (width > kMaxImagePixels / height)
    fail_image(in, image_format_name(format), " image of ", width, " x ", height, " pixels exceeds the limit of ",
               kMaxImagePixels, " pixels (PIL's decompression-bomb limit, which torchvision's loader hits too)");
}

DecodedImage rgb_image(int width, int height) {
  DecodedImage img;
  img.width = width;
  img.height = height;
  img.channels = 3;
  img.hwc.resize(size_t(width) * size_t(height) * 3);
  return img;
}

}  // namespace codecs

namespace {

using codecs::ImageBytes;

struct Signature {
  ImageFormat format;
  size_t offset;
  const char* bytes;
  size_t length;
};

// The magic bytes of each format. WebP is "RIFF" + a 4-byte size + "WEBP": two parts.
const Signature kSignatures[] = {
    {ImageFormat::jpeg, 0, "\xFF\xD8\xFF", 3},
    {ImageFormat::png, 0, "\x89PNG\r\n\x1A\n", 8},
    {ImageFormat::gif, 0, "GIF87a", 6},
    {ImageFormat::gif, 0, "GIF89a", 6},
    {ImageFormat::bmp, 0, "BM", 2},
    {ImageFormat::tiff, 0, "II*\0", 4},  // little-endian TIFF
    {ImageFormat::tiff, 0, "MM\0*", 4},  // big-endian TIFF
    {ImageFormat::tiff, 0, "II+\0", 4},  // BigTIFF
    {ImageFormat::tiff, 0, "MM\0+", 4},
};

bool has_bytes_at(const ImageBytes& in, size_t offset, const char* bytes, size_t length) {
  return in.size >= offset + length && std::memcmp(in.data + offset, bytes, length) == 0;
}

bool name_ends_with_tga(const std::string& name) {
  if (name.size() < 4) return false;
  std::string ext = name.substr(name.size() - 4);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return ext == ".tga";
}

std::string hex_prefix(const ImageBytes& in) {
  static const char digits[] = "0123456789abcdef";
  std::string hex = "0x";
  for (size_t i = 0; i < std::min<size_t>(in.size, 8); ++i) {
    hex += digits[in.data[i] >> 4];
    hex += digits[in.data[i] & 15];
  }
  return hex;
}

ImageFormat sniff_format(const ImageBytes& in) {
  if (in.file_size == 0) codecs::fail_image(in, "empty file (0 bytes), not an image");
  for (const Signature& s : kSignatures)
    if (has_bytes_at(in, s.offset, s.bytes, s.length)) return s.format;
  if (has_bytes_at(in, 0, "RIFF", 4) && has_bytes_at(in, 8, "WEBP", 4)) return ImageFormat::webp;
  if (in.size >= 2 && in.data[0] == 'P' && in.data[1] >= '1' && in.data[1] <= '7') return ImageFormat::pnm;
  // A file cut off inside its magic bytes still says what it was meant to be.
  for (const Signature& s : kSignatures)
    if (in.size >= 2 && in.size < s.length && has_bytes_at(in, 0, s.bytes, in.size))
      codecs::fail_image(in, "truncated ", image_format_name(s.format), " file (only ", in.size, " bytes)");
  if (name_ends_with_tga(*in.name)) return ImageFormat::tga;  // TGA alone has no magic bytes
  codecs::fail_image(in, "not an image: unknown magic bytes ", hex_prefix(in),
                     " (expected JPEG, PNG, BMP, GIF, PPM/PGM, WebP or TIFF)");
}

// The first `limit` bytes of a file (all of it for limit = SIZE_MAX) and its size on disk.
struct FileBytes {
  std::vector<uint8_t> bytes;
  uint64_t file_size = 0;
};

FileBytes read_file_prefix(const std::string& path, size_t limit) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) fail("cannot read image ", path, ": cannot open it (", std::strerror(errno), ")");
  struct stat st {};
  if (::fstat(::fileno(f.get()), &st) != 0)
    fail("cannot read image ", path, ": cannot stat it (", std::strerror(errno), ")");
  if (S_ISDIR(st.st_mode)) fail("cannot read image ", path, ": it is a directory, not an image file");
  FileBytes out;
  out.file_size = static_cast<uint64_t>(st.st_size);
  out.bytes.resize(static_cast<size_t>(std::min<uint64_t>(out.file_size, limit)));
  const size_t got = std::fread(out.bytes.data(), 1, out.bytes.size(), f.get());
  if (got != out.bytes.size()) {
    if (std::ferror(f.get())) fail("cannot read image ", path, ": read error (", std::strerror(errno), ")");
    out.bytes.resize(got);  // shrank while we read it: judge what is there
    out.file_size = got;
  }
  return out;
}

DecodedImage decode_known(const ImageBytes& in, ImageFormat format) {
  switch (format) {
    case ImageFormat::jpeg: return codecs::decode_jpeg(in);
    case ImageFormat::pnm: return codecs::decode_pnm(in);
    case ImageFormat::webp: return codecs::decode_webp(in);
    case ImageFormat::tiff: return codecs::decode_tiff(in);
    case ImageFormat::png:
    case ImageFormat::gif:
    case ImageFormat::bmp:
    case ImageFormat::tga: return codecs::decode_with_stb(in, format);
  }
  codecs::fail_image(in, "internal error: no decoder for this format");
}

ImageHeader probe_known(const ImageBytes& in, ImageFormat format) {
  switch (format) {
    case ImageFormat::jpeg: return codecs::probe_jpeg(in);
    case ImageFormat::pnm: return codecs::probe_pnm(in);
    case ImageFormat::webp: return codecs::probe_webp(in);
    case ImageFormat::tiff: return codecs::probe_tiff(in);
    case ImageFormat::png:
    case ImageFormat::gif:
    case ImageFormat::bmp:
    case ImageFormat::tga: return codecs::probe_with_stb(in, format);
  }
  codecs::fail_image(in, "internal error: no decoder for this format");
}

}  // namespace

DecodedImage decode_image_bytes(const uint8_t* bytes, size_t size, const std::string& name) {
  const ImageBytes in{bytes, size, size, &name};
  return decode_known(in, sniff_format(in));
}

DecodedImage decode_image(const std::string& path) {
  const FileBytes file = read_file_prefix(path, SIZE_MAX);
  return decode_image_bytes(file.bytes.data(), file.bytes.size(), path);
}

ImageHeader probe_image(const std::string& path) {
  // Headers sit at the start, after at most a large EXIF block: 64 KiB nearly always holds
  // them. When it does not (or the format keeps its directory at the end, as TIFF may), the
  // whole file is read and asked again, so a prefix never decides that a file is bad.
  constexpr size_t kPrefixBytes = 64 * 1024;
  FileBytes file = read_file_prefix(path, kPrefixBytes);
  ImageBytes in{file.bytes.data(), file.bytes.size(), file.file_size, &path};
  const ImageFormat format = sniff_format(in);
  if (in.complete()) return probe_known(in, format);
  try {
    return probe_known(in, format);
  } catch (const Error&) {
    file = read_file_prefix(path, SIZE_MAX);
    in = ImageBytes{file.bytes.data(), file.bytes.size(), file.file_size, &path};
    return probe_known(in, sniff_format(in));
  }
}

}  // namespace ge
