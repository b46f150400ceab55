// The store's sockets and message format (see socket.h).
#include "distributed/socket.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

#include "rtx/error.h"

namespace rtx::dist::net {

void Socket::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Socket listen_on(int& port) {
  Socket s(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  bool v6 = s.valid();
  if (!v6) s = Socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) throw DistStoreError(std::string("[TCPStore] socket: ") + std::strerror(errno));
  const int one = 1, zero = 0;
  ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  int rc;
  if (v6) {
    ::setsockopt(s.fd(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));  // IPv4 clients too
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons(static_cast<uint16_t>(port));
    rc = ::bind(s.fd(), reinterpret_cast<sockaddr*>(&a), sizeof(a));
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<uint16_t>(port));
    rc = ::bind(s.fd(), reinterpret_cast<sockaddr*>(&a), sizeof(a));
  }
  if (rc != 0 || ::listen(s.fd(), 128) != 0) {
    throw DistStoreError("[TCPStore] the master could not listen on port " + std::to_string(port) + ": " +
                         std::strerror(errno));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  ::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&bound), &len);
  port = v6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
            : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return s;
}

Socket connect_to(const std::string& host, int port, Clock::time_point deadline) {
  std::string last = "timed out";
  auto pause = std::chrono::milliseconds(5);
  do {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const int gai = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
    if (gai != 0) {
      last = ::gai_strerror(gai);
    } else {
      for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
        Socket s(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
        if (!s.valid()) continue;
        if (::connect(s.fd(), ai->ai_addr, ai->ai_addrlen) == 0) {
          const int one = 1;
          ::setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
          ::freeaddrinfo(res);
          return s;
        }
        last = std::strerror(errno);
      }
      ::freeaddrinfo(res);
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  } while (Clock::now() < deadline);
  throw DistStoreError("[TCPStore] could not connect to the store at " + host + ":" + std::to_string(port) +
                       " before the timeout: " + last);
}

namespace {
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_u64(const std::string& buf, size_t at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(buf[at + i])) << (8 * i);
  return v;
}
}  // namespace

// Layout: u64 total length of what follows, u8 cmd, i64 value, u64 count, then per string u64 length + bytes.
std::string encode(const Message& m) {
  std::string body;
  body.push_back(static_cast<char>(m.cmd));
  put_u64(body, static_cast<uint64_t>(m.value));
  put_u64(body, m.strings.size());
  for (const auto& s : m.strings) {
    put_u64(body, s.size());
    body += s;
  }
  std::string out;
  put_u64(out, body.size());
  return out + body;
}

bool decode(std::string& buf, Message& m) {
  if (buf.size() < 8) return false;
  const uint64_t total = get_u64(buf, 0);
  if (buf.size() < 8 + total) return false;
  size_t at = 8;
  m.cmd = static_cast<uint8_t>(buf[at++]);
  m.value = static_cast<int64_t>(get_u64(buf, at));
  at += 8;
  const uint64_t count = get_u64(buf, at);
  at += 8;
  m.strings.clear();
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t len = get_u64(buf, at);
    at += 8;
    m.strings.emplace_back(buf, at, len);
    at += len;
  }
  buf.erase(0, 8 + total);
  return true;
}

bool write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

int read_message(int fd, std::string& buf, Message& m, Clock::time_point deadline) {
  char chunk[65536];
  while (!decode(buf, m)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return 0;
    pollfd p{fd, POLLIN, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1 << 30)));
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return -1;
    if (rc == 0) return 0;
    const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    buf.append(chunk, static_cast<size_t>(n));
  }
  return 1;
}

}  // namespace rtx::dist::net
