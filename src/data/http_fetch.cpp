// fetch_url_to_file: libcurl's easy interface, reached through dlsym so nothing links it.
#include "data/http_fetch.h"

#include <curl/curl.h>
#include <dlfcn.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>

#include "ganengine/error.h"

namespace ge {
namespace {

// The handful of entry points used, resolved once.
struct Curl {
  CURLcode (*global_init)(long) = nullptr;
  CURL* (*easy_init)() = nullptr;
  CURLcode (*easy_setopt)(CURL*, CURLoption, ...) = nullptr;
  CURLcode (*easy_perform)(CURL*) = nullptr;
  CURLcode (*easy_getinfo)(CURL*, CURLINFO, ...) = nullptr;
  void (*easy_cleanup)(CURL*) = nullptr;
  const char* (*easy_strerror)(CURLcode) = nullptr;
  std::string error;  // why loading failed; empty when it worked
};

template <class F>
void resolve(void* lib, const char* name, F* out, std::string* error) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  if (!*out && error->empty()) *error = std::string("libcurl lacks ") + name;
}

const Curl& curl() {
  static const Curl loaded = [] {
    Curl c;
    void* lib = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libcurl-gnutls.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      c.error = "libcurl is not installed (" + std::string(dlerror()) +
                "); install it (Debian: apt-get install libcurl4) or download the files by hand";
      return c;
    }
    resolve(lib, "curl_global_init", &c.global_init, &c.error);
    resolve(lib, "curl_easy_init", &c.easy_init, &c.error);
    resolve(lib, "curl_easy_setopt", &c.easy_setopt, &c.error);
    resolve(lib, "curl_easy_perform", &c.easy_perform, &c.error);
    resolve(lib, "curl_easy_getinfo", &c.easy_getinfo, &c.error);
    resolve(lib, "curl_easy_cleanup", &c.easy_cleanup, &c.error);
    resolve(lib, "curl_easy_strerror", &c.easy_strerror, &c.error);
    if (c.error.empty() && c.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) c.error = "curl_global_init failed";
    return c;  // the library stays loaded for the life of the process
  }();
  return loaded;
}

size_t write_to_file(char* data, size_t size, size_t count, void* file) {
  return std::fwrite(data, size, count, static_cast<std::FILE*>(file)) * size;
}

bool is_http(const std::string& url) { return url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0; }

}  // namespace

void fetch_url_to_file(const std::string& url, const std::string& path) {
  const Curl& c = curl();
  if (!c.error.empty()) fail("cannot download ", url, ": ", c.error);

  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!file) fail("cannot download ", url, ": cannot create ", path, ": ", std::strerror(errno));
  std::unique_ptr<CURL, void (*)(CURL*)> handle(c.easy_init(), c.easy_cleanup);
  if (!handle) fail("cannot download ", url, ": curl_easy_init failed");

  CURL* h = handle.get();
  char error_text[CURL_ERROR_SIZE] = {};
  c.easy_setopt(h, CURLOPT_URL, url.c_str());
  c.easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
  c.easy_setopt(h, CURLOPT_MAXREDIRS, 10L);
  c.easy_setopt(h, CURLOPT_WRITEFUNCTION, &write_to_file);
  c.easy_setopt(h, CURLOPT_WRITEDATA, file.get());
  c.easy_setopt(h, CURLOPT_ERRORBUFFER, error_text);
  c.easy_setopt(h, CURLOPT_USERAGENT, "ganengine");
  c.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  // Give up on an unreachable host after 30 s, and on a transfer stalled below 1 KB/s for 60 s.
  c.easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
  c.easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  c.easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 60L);

  const CURLcode rc = c.easy_perform(h);
  long status = 0;
  c.easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  if (rc == CURLE_WRITE_ERROR) fail("cannot download ", url, ": cannot write ", path, " (is the disk full?)");
  if (rc != CURLE_OK)
    fail("cannot download ", url, ": ", error_text[0] ? error_text : c.easy_strerror(rc),
         status ? " (HTTP status " + std::to_string(status) + ")" : std::string());
  if (is_http(url) && status != 200) fail("cannot download ", url, ": the server answered HTTP status ", status);
  if (std::fflush(file.get()) != 0 || std::ferror(file.get()))
    fail("cannot download ", url, ": cannot write ", path, " (is the disk full?)");
}

}  // namespace ge
