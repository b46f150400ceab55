// Reading datasets stored in files, and writing files atomically.
#pragma once

#include <string>
#include <string_view>

#include "rtx/export.h"
#include "rtx/tensor.h"

namespace rtx::data {

// Reads an IDX file (the MNIST family's format: a 4-byte magic naming the element type and rank,
// big-endian 32-bit dimensions, then big-endian data), plain or gzip-compressed, into a CPU tensor
// of that shape. Element types: unsigned byte -> uint8, signed byte -> int8, short -> int16,
// int -> int32, float -> float32, double -> float64. A missing, truncated, oversized or
// malformed file raises CheckpointError naming the file (a gzip file also when its compressed data
// is corrupt or stops before the trailer that checks it), and a path with a NUL byte ValueError.
// The data is decoded straight into the tensor as it is read (the file is never held in memory
// besides it), and the tensor is allocated only once the file is known to be able to hold it: the
// file's size for a plain file, 1032 times it (deflate's largest expansion) for a gzip file.
RTX_API Tensor read_idx(const std::string& path);

// A file written so that readers see its old contents or all of the new ones, never a part, even
// across a crash: the data goes to a temporary file beside it, "<path>.rtx-partial-XXXXXX", locked
// (flock) while it is written; commit() flushes it to disk and renames it over path. An AtomicFile
// not committed (an error, an exception) removes its temporary file. A save killed outright leaves
// its temporary file behind, unlocked: the next AtomicFile in the same directory removes it (every
// unlocked "<name>.rtx-partial-XXXXXX" there, whatever its target, since savers such as trainers
// name each file anew), never one that a live writer holds.
class RTX_API AtomicFile {
 public:
  // Creates the temporary file (permissions 0666 less the umask, as a new file gets); op names the
  // caller in errors ("[op] path: ..."). Throws ValueError for a path with a NUL byte and
  // CheckpointError naming path when the temporary file cannot be created.
  AtomicFile(std::string path, std::string op);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // The temporary file's descriptor, open for writing until commit().
  int fd() const { return fd_; }
  const std::string& temporary_path() const { return temporary_; }
  // Writes data entirely at the current position; throws CheckpointError when it cannot.
  void write(std::string_view data);
  // Flushes the temporary file to disk, renames it over path and makes the rename durable; throws
  // CheckpointError (and removes the temporary file) when any step fails.
  void commit();

 private:
  [[noreturn]] void fail(const std::string& what);
  void discard() noexcept;

  std::string path_;
  std::string op_;
  std::string temporary_;
  int fd_ = -1;
};

}  // namespace rtx::data
