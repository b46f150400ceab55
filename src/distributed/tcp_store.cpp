// TCPStore: the store's server (one thread polling every client connection, holding blocked get and
// wait requests until their keys are set) and its client (one connection per store object, its
// requests serialized, a reply that does not come before the timeout raising DistStoreError).
#include <fcntl.h>
#include <map>
#include <mutex>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

#include "distributed/socket.h"
#include "distributed/work.h"
#include "rtx/distributed.h"

namespace rtx::dist {
namespace {

enum Cmd : uint8_t { kSet = 1, kGet, kAdd, kCheck, kWait, kDelete, kNumKeys, kReply };

std::string key_list(const std::vector<std::string>& keys) {
  std::string s;
  for (const auto& k : keys) s += (s.empty() ? "'" : ", '") + k + "'";
  return "[" + s + "]";
}

}  // namespace

struct TCPStore::Server {
  net::Socket listener;
  int wake[2] = {-1, -1};  // a pipe whose write end stops the loop
  std::thread thread;
  std::map<std::string, std::string> data;
  struct Conn {
    net::Socket sock;
    std::string buf;
  };
  struct Waiter {
    int fd;
    net::Message request;
  };
  std::map<int, Conn> conns;
  std::vector<Waiter> waiters;

  explicit Server(int& port) : listener(net::listen_on(port)) {
    if (::pipe2(wake, O_CLOEXEC) != 0) throw DistStoreError("[TCPStore] pipe failed");
    thread = std::thread([this] { loop(); });
  }
  ~Server() {
    const char c = 0;
    (void)!::write(wake[1], &c, 1);
    thread.join();
    ::close(wake[0]);
    ::close(wake[1]);
  }

  bool has_all(const std::vector<std::string>& keys) const {
    for (const auto& k : keys)
      if (data.count(k) == 0) return false;
    return true;
  }
  // The reply to a request, or nothing while a get or wait must keep waiting.
  bool answer(const net::Message& req, net::Message& rep) {
    rep = net::Message{kReply, {}, 0};
    switch (req.cmd) {
      case kSet: data[req.strings.at(0)] = req.strings.at(1); return true;
      case kGet:
        if (!has_all(req.strings)) return false;
        rep.strings.push_back(data[req.strings.at(0)]);
        return true;
      case kAdd: {
        auto& v = data[req.strings.at(0)];
        const int64_t now = (v.empty() ? 0 : std::stoll(v)) + req.value;
        v = std::to_string(now);
        rep.value = now;
        return true;
      }
      case kCheck: rep.value = has_all(req.strings) ? 1 : 0; return true;
      case kWait: return has_all(req.strings);
      case kDelete: rep.value = static_cast<int64_t>(data.erase(req.strings.at(0))); return true;
      case kNumKeys: rep.value = static_cast<int64_t>(data.size()); return true;
      default: return true;
    }
  }
  void serve(int fd, const net::Message& req) {
    net::Message rep;
    if (answer(req, rep)) {
      net::write_all(fd, net::encode(rep));
      if (req.cmd == kSet || req.cmd == kAdd) wake_waiters();
    } else {
      waiters.push_back({fd, req});
    }
  }
  void wake_waiters() {
    std::vector<Waiter> still;
    for (auto& w : waiters) {
      net::Message rep;
      if (answer(w.request, rep)) {
        net::write_all(w.fd, net::encode(rep));
      } else {
        still.push_back(std::move(w));
      }
    }
    waiters = std::move(still);
  }
  void drop(int fd) {
    std::vector<Waiter> still;
    for (auto& w : waiters)
      if (w.fd != fd) still.push_back(std::move(w));
    waiters = std::move(still);
    conns.erase(fd);
  }
  void loop() {
    char chunk[65536];
    for (;;) {
      std::vector<pollfd> fds{{wake[0], POLLIN, 0}, {listener.fd(), POLLIN, 0}};
      for (auto& [fd, c] : conns) fds.push_back({fd, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), -1) < 0) continue;
      if (fds[0].revents != 0) return;
      if (fds[1].revents & POLLIN) {
        const int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) conns[fd].sock = net::Socket(fd);
      }
      for (size_t i = 2; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        const int fd = fds[i].fd;
        const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
        if (n <= 0) {
          drop(fd);
          continue;
        }
        auto& buf = conns[fd].buf;
        buf.append(chunk, static_cast<size_t>(n));
        net::Message req;
        try {
          while (net::decode(buf, req)) serve(fd, req);
        } catch (const std::exception&) {  // a malformed request: drop that client
          drop(fd);
        }
      }
    }
  }
};

struct TCPStore::Client {
  std::string host;
  int port;
  std::mutex mu;
  net::Socket sock;
  std::string buf;

  void connect(Timeout timeout) {
    sock = net::connect_to(host, port, net::Clock::now() + timeout);
    buf.clear();
  }
  net::Message call(const net::Message& req, Timeout timeout, const char* what, const std::vector<std::string>& keys) {
    std::lock_guard<std::mutex> lock(mu);
    if (!sock.valid()) connect(timeout);
    if (!net::write_all(sock.fd(), net::encode(req))) {
      sock.reset();
      throw DistStoreError(std::string("[TCPStore.") + what + "] the store at " + host + ":" + std::to_string(port) +
                           " closed the connection (keys " + key_list(keys) + ")");
    }
    net::Message rep;
    const int rc = net::read_message(sock.fd(), buf, rep, net::Clock::now() + timeout);
    if (rc == 1) return rep;
    sock.reset();  // a reply may still come: the next request starts on a fresh connection
    if (rc == 0) {
      throw DistStoreError(std::string("[TCPStore.") + what + "] timed out after " + format_timeout(timeout) +
                           " waiting for keys " + key_list(keys) + " in the store at " + host + ":" +
                           std::to_string(port));
    }
    throw DistStoreError(std::string("[TCPStore.") + what + "] the store at " + host + ":" + std::to_string(port) +
                         " closed the connection (keys " + key_list(keys) + "); did the master process exit?");
  }
};

TCPStore::TCPStore(const std::string& host, int port, std::optional<int> world_size, bool is_master,
                   Timeout timeout)
    : Store(timeout), host_(host), port_(port), world_size_(world_size) {
  if (port < 0 || port > 65535) throw ValueError("[TCPStore] port " + std::to_string(port) + " is not in [0, 65535]");
  if (world_size && *world_size < 1)
    throw ValueError("[TCPStore] world_size " + std::to_string(*world_size) + " must be positive");
  if (timeout.count() <= 0) throw ValueError("[TCPStore] the timeout must be positive");
  if (is_master) server_ = std::make_unique<Server>(port_);
  else if (port == 0) throw ValueError("[TCPStore] port 0 (a free port) is only for the master");
  client_ = std::make_unique<Client>();
  client_->host = host;
  client_->port = port_;
  std::lock_guard<std::mutex> lock(client_->mu);
  client_->connect(timeout);
}

TCPStore::~TCPStore() {
  client_.reset();
  server_.reset();
}

void TCPStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  client_->call({kSet, {key, std::string(value.begin(), value.end())}, 0}, timeout_, "set", {key});
}

std::vector<uint8_t> TCPStore::get(const std::string& key) {
  const auto rep = client_->call({kGet, {key}, 0}, timeout_, "get", {key});
  return std::vector<uint8_t>(rep.strings.at(0).begin(), rep.strings.at(0).end());
}

int64_t TCPStore::add(const std::string& key, int64_t delta) {
  return client_->call({kAdd, {key}, delta}, timeout_, "add", {key}).value;
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  return client_->call({kCheck, keys, 0}, timeout_, "check", keys).value != 0;
}

void TCPStore::wait(const std::vector<std::string>& keys, Timeout timeout) {
  client_->call({kWait, keys, 0}, timeout, "wait", keys);
}

bool TCPStore::delete_key(const std::string& key) {
  return client_->call({kDelete, {key}, 0}, timeout_, "delete_key", {key}).value != 0;
}

int64_t TCPStore::num_keys() { return client_->call({kNumKeys, {}, 0}, timeout_, "num_keys", {}).value; }

}  // namespace rtx::dist
