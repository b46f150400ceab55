// The IDX format reader without tensors: it checks a file's header, then decodes its data into
// memory the caller provides. read_idx (idx.cpp) puts a tensor around it; the fuzz target
// tests/fuzz/fuzz_idx.cpp drives it alone.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <string>
#include <vector>

#include "rtx/dtype.h"

namespace rtx::data::detail {

class IdxReader {
 public:
  // Opens path (plain, or gzip-compressed when it starts with gzip's magic) and reads its header;
  // throws CheckpointError naming the file when it is missing, malformed, or too small to hold the
  // data its header promises, and ValueError for a path with a NUL byte.
  explicit IdxReader(const std::string& path);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  uint64_t numel() const { return numel_; }
  // Decodes the numel() elements into out (numel() * element_size(dtype()) bytes, native
  // endianness), reading the file in chunks; throws CheckpointError when the file ends early,
  // holds more than its header promises, or (gzip) its compressed data is corrupt or incomplete.
  void read_into(void* out);

 private:
  [[noreturn]] void fail(const std::string& what) const;
  // Reads up to n bytes of the (decompressed) data; fewer only at its end.
  size_t read(void* out, size_t n);
  // Refills input_ from the file; false at the end of the file.
  bool refill();

  struct File {
    int fd = -1;
    File() = default;
    File(const File&) = delete;
    File& operator=(const File&) = delete;
    ~File();
  };
  struct Inflater {
    z_stream stream{};
    bool initialised = false;
    Inflater() = default;
    Inflater(const Inflater&) = delete;
    Inflater& operator=(const Inflater&) = delete;
    ~Inflater();
  };

  std::string path_;
  File file_;
  bool gzip_ = false;
  Inflater inflater_;         // inflating a gzip file (gzip_)
  bool in_member_ = false;    // inside a gzip member, before its checked trailer
  std::vector<uint8_t> input_;
  size_t input_at_ = 0;       // plain files: the next unread byte of input_
  size_t input_end_ = 0;
  uint8_t code_ = 0;          // the element type code of the magic number
  int file_bytes_ = 0;        // bytes per element in the file
  DType dtype_ = DType::UInt8;
  std::vector<int64_t> shape_;
  uint64_t numel_ = 0;
};

}  // namespace rtx::data::detail
