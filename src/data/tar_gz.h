// Unpacking a .tar.gz (the CIFAR-10 release): a ustar reader over zlib's gzip stream.
#pragma once
#include <string>

namespace ge {

// Extracts the regular files and directories of archive into dest_dir (which must exist),
// checking every header's checksum. Entries of other kinds (links, devices) are skipped;
// names that are absolute or climb out with ".." are refused. Throws ge::Error naming the
// archive and what was wrong (corrupt or truncated gzip data, a bad header, a short entry).
// On failure dest_dir may hold part of the archive: callers extract into a scratch
// directory and move the result into place only once it is complete.
void extract_tar_gz(const std::string& archive, const std::string& dest_dir);

}  // namespace ge
