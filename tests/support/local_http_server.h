// A tiny HTTP/1.0 file server on 127.0.0.1 for the download tests: GET /<name> answers
// 200 with the file <root>/<name>, 404 when there is none; GET /status/<code> answers that
// status. One connection at a time on a thread of its own, which stops when the server is
// destroyed or after a time limit, whichever comes first. It also clears the proxy variables
// of the process so that no request can leave the machine through a proxy.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <thread>

namespace ge::test {

class LocalHttpServer {
 public:
  explicit LocalHttpServer(std::string root, std::chrono::seconds limit = std::chrono::seconds(120))
      : root_(std::move(root)), deadline_(std::chrono::steady_clock::now() + limit) {
    for (const char* v : {"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"})
      ::unsetenv(v);
    ::setenv("no_proxy", "*", 1);
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener_ < 0) throw std::runtime_error("socket() failed");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;  // any free port
    socklen_t len = sizeof addr;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listener_, 8) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ::close(listener_);
      throw std::runtime_error("cannot listen on 127.0.0.1");
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~LocalHttpServer() {
    stop_ = true;
    thread_.join();
    ::close(listener_);
  }
  LocalHttpServer(const LocalHttpServer&) = delete;
  LocalHttpServer& operator=(const LocalHttpServer&) = delete;

  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/"; }
  int requests() const { return requests_.load(); }

 private:
  void serve() {
    while (!stop_ && std::chrono::steady_clock::now() < deadline_) {
      pollfd p{listener_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      timeval timeout{5, 0};
      ::setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
      ::setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
      answer(client);
      ::close(client);
    }
  }

  void answer(int client) {
    std::string request;
    char buffer[4096];
    while (request.find("\r\n\r\n") == std::string::npos && request.size() < 65536) {
      const ssize_t got = ::recv(client, buffer, sizeof buffer, 0);
      if (got <= 0) return;
      request.append(buffer, size_t(got));
    }
    ++requests_;
    const size_t start = request.find(' ') + 1, end = request.find(' ', start);
    const std::string target = request.substr(start, end - start);
    if (target.rfind("/status/", 0) == 0) return send(client, std::stoi(target.substr(8)), "status page\n");
    const std::filesystem::path file = std::filesystem::path(root_) / target.substr(1);
    if (target.find("..") != std::string::npos || !std::filesystem::is_regular_file(file))
      return send(client, 404, "not found\n");
    std::ifstream in(file, std::ios::binary);
    send(client, 200, std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()));
  }

  static void send(int client, int status, const std::string& body) {
    const std::string head = "HTTP/1.0 " + std::to_string(status) +
                             " Test\r\nContent-Length: " + std::to_string(body.size()) +
                             "\r\nConnection: close\r\n\r\n";
    const std::string all = head + body;
    for (size_t sent = 0; sent < all.size();) {
      const ssize_t n = ::send(client, all.data() + sent, all.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += size_t(n);
    }
  }

  std::string root_;
  std::chrono::steady_clock::time_point deadline_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::thread thread_;
};

}  // namespace ge::test
