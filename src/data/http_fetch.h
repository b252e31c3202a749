// Fetching one URL into one file, through libcurl.
//
// libcurl is loaded when a download is first asked for (dlopen of libcurl.so.4), not linked:
// the binaries then run on hosts without it (the GPU hosts, like for libstb), and only
// --download needs it. A missing libcurl is a clear ge::Error, not a loader failure at start.
#pragma once
#include <string>

namespace ge {

// Writes the body of url to path (created or truncated), following redirects. Throws
// ge::Error with the URL and the reason: an HTTP status other than 200 (for http/https),
// a transfer error (DNS, connection, timeout, a stalled transfer), a write error, or libcurl
// missing. path may then hold a partial body; the caller removes it.
void fetch_url_to_file(const std::string& url, const std::string& path);

}  // namespace ge
