// AtomicFile (rtx/data.h): a locked temporary file beside the target, renamed over it on commit;
// and the removal of the temporary files that interrupted saves of the same target left behind.
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "data/path.h"
#include "rtx/data.h"
#include "rtx/error.h"

namespace rtx::data {
namespace {

constexpr std::string_view kMarker = ".rtx-partial-";
constexpr size_t kSuffixLength = 6;
constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
constexpr int kAttempts = 100;

// The directory of path ("." for a bare file name).
std::string directory_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

bool same_file(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

// True when name is "<target>.rtx-partial-XXXXXX", a temporary file AtomicFile makes.
bool is_temporary(std::string_view name) {
  if (name.size() <= kMarker.size() + kSuffixLength) return false;
  const size_t marker = name.size() - kSuffixLength - kMarker.size();
  if (name.substr(marker, kMarker.size()) != kMarker) return false;
  for (const char c : name.substr(name.size() - kSuffixLength)) {
    if (kAlphabet.find(c) == std::string_view::npos) return false;
  }
  return true;
}

// Removes file when it is a regular file no process holds a lock on (its writer died), checking
// under the lock that the name still refers to the file that was locked.
void remove_if_unlocked(const std::string& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return;
  struct stat opened {}, named {};
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0 && ::fstat(fd, &opened) == 0 && S_ISREG(opened.st_mode) &&
      ::lstat(file.c_str(), &named) == 0 && same_file(opened, named)) {
    ::unlink(file.c_str());
  }
  ::close(fd);
}

// Removes the unlocked "<target>.rtx-partial-XXXXXX" files in the directory of path, whatever
// their target: savers such as trainers name each checkpoint anew, so a killed save's target is
// seldom saved again (best effort: an unreadable directory or a file that cannot be removed is left
// as it is).
void remove_stale_temporaries(const std::string& path) {
  const std::string directory = directory_of(path);
  DIR* dir = ::opendir(directory.c_str());
  if (dir == nullptr) return;
  std::vector<std::string> stale;
  while (const dirent* entry = ::readdir(dir)) {
    if (is_temporary(entry->d_name)) stale.push_back(directory + "/" + entry->d_name);
  }
  ::closedir(dir);
  for (const std::string& file : stale) remove_if_unlocked(file);
}

}  // namespace

AtomicFile::AtomicFile(std::string path, std::string op) : path_(std::move(path)), op_(std::move(op)) {
  detail::check_path(path_, op_.c_str());
  remove_stale_temporaries(path_);
  std::random_device random;
  std::uniform_int_distribution<size_t> pick(0, kAlphabet.size() - 1);
  for (int attempt = 1; fd_ < 0; ++attempt) {
    std::string candidate = path_ + std::string(kMarker);
    for (size_t i = 0; i < kSuffixLength; ++i) candidate += kAlphabet[pick(random)];
    // Mode 0666 less the umask, as for any new file.
    const int fd = ::open(candidate.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
      if (errno == EEXIST && attempt < kAttempts) continue;
      fail(std::string("cannot create a temporary file: ") + std::strerror(errno));
    }
    // Where flock is not supported the file stays unlocked, and other saves' clean-up cannot lock
    // it either. Between open and flock another save's clean-up may have removed it: then try again.
    (void)::flock(fd, LOCK_EX);
    struct stat opened {}, named {};
    if (::fstat(fd, &opened) == 0 && ::lstat(candidate.c_str(), &named) == 0 && same_file(opened, named)) {
      fd_ = fd;
      temporary_ = std::move(candidate);
    } else {
      ::close(fd);
      if (attempt >= kAttempts) fail("cannot create a temporary file: it keeps disappearing");
    }
  }
}

AtomicFile::~AtomicFile() { discard(); }

void AtomicFile::write(std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd_, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(std::string("cannot write: ") + std::strerror(n < 0 ? errno : ENOSPC));
    data.remove_prefix(static_cast<size_t>(n));
  }
}

void AtomicFile::commit() {
  if (::fsync(fd_) != 0) fail(std::string("cannot flush: ") + std::strerror(errno));
  // Renamed while still locked, so that no clean-up removes it in between.
  if (::rename(temporary_.c_str(), path_.c_str()) != 0) {
    fail(std::string("cannot rename the temporary file: ") + std::strerror(errno));
  }
  temporary_.clear();
  ::close(fd_);
  fd_ = -1;
  // Make the rename itself durable.
  const int dir_fd = ::open(directory_of(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

void AtomicFile::fail(const std::string& what) {
  discard();
  throw CheckpointError("[" + op_ + "] " + path_ + ": " + what);
}

void AtomicFile::discard() noexcept {
  if (!temporary_.empty()) ::unlink(temporary_.c_str());  // before the lock goes with the descriptor
  temporary_.clear();
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

}  // namespace rtx::data
