// Filling a dataset cache: every image of a dataset decoded once, in index order, and
// streamed to a file (private to src/data; dataset_cache.cpp writes the header first).
#pragma once
#include <cstdio>
#include <string>

#include "ganengine/data.h"

namespace ge {

// Reads images 0 .. size-1 of source on `workers` threads (0 or 1: the calling thread) a
// chunk at a time and writes their bytes to f in order, so memory holds one chunk, not the
// dataset. When this takes more than ~2 s a progress line with an ETA naming `path` goes to
// stderr. After the images comes one little-endian CRC-32 (zlib's) per image, in order.
// The first exception of any read is passed on (the caller's atomic write then
// removes the partial file); a failed write throws ge::Error naming path.
// The checksum stored for one image's bytes.
uint32_t image_checksum(const uint8_t* bytes, size_t size);

void write_decoded_images(const Dataset& source, int workers, const std::string& path, std::FILE* f);

}  // namespace ge
