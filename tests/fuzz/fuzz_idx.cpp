// libFuzzer target: the IDX reader (src/data/idx_reader.h) on arbitrary file contents, plain or
// gzip-compressed as they come. Every input must decode or raise CheckpointError; ASan and UBSan
// check the memory the reader touches, and libFuzzer's malloc limit that it never allocates for
// data the file cannot hold.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "data/idx_reader.h"
#include "rtx/error.h"

namespace {

// A file in memory (memfd) that the reader opens by path like any file.
class ScratchFile {
 public:
  ScratchFile() : fd_(memfd_create("rtx_fuzz_idx", MFD_CLOEXEC)), path_("/proc/self/fd/" + std::to_string(fd_)) {
    if (fd_ < 0) std::abort();
  }
  const std::string& hold(const uint8_t* data, size_t size) {
    if (ftruncate(fd_, 0) != 0 || (size > 0 && pwrite(fd_, data, size, 0) != static_cast<ssize_t>(size))) std::abort();
    return path_;
  }

 private:
  int fd_;
  std::string path_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ScratchFile file;
  try {
    rtx::data::detail::IdxReader reader(file.hold(data, size));
    std::vector<uint8_t> out(reader.numel() * rtx::element_size(reader.dtype()));
    reader.read_into(out.data());
  } catch (const rtx::CheckpointError&) {
  }
  return 0;
}
