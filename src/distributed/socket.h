// Blocking POSIX TCP sockets for the store: listen, connect with retries, exact reads and writes
// bounded by a deadline, and the length-prefixed message format the store's client and server share.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace rtx::dist::net {

using Clock = std::chrono::steady_clock;

// An owned file descriptor, closed on destruction.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { reset(); }
  Socket(Socket&& o) noexcept : fd_(o.release()) {}
  Socket& operator=(Socket&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = o.release();
    }
    return *this;
  }
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset();

 private:
  int fd_ = -1;
};

// A socket listening on all interfaces at port (0: a free one); sets port to the bound port.
Socket listen_on(int& port);
// Connects to host:port, retrying until deadline (the server may not be up yet); throws
// DistStoreError naming the address and the last error.
Socket connect_to(const std::string& host, int port, Clock::time_point deadline);

// A request or reply: a command byte, strings (keys and values) and one integer.
struct Message {
  uint8_t cmd = 0;
  std::vector<std::string> strings;
  int64_t value = 0;
};
std::string encode(const Message& m);
// Decodes one message from the front of buf when it is complete: erases it and returns true.
bool decode(std::string& buf, Message& m);

// Writes all of data; false when the peer is gone.
bool write_all(int fd, const std::string& data);
// Reads one message, waiting until deadline: 1 read, 0 timed out, -1 connection closed or failed.
int read_message(int fd, std::string& buf, Message& m, Clock::time_point deadline);

}  // namespace rtx::dist::net
