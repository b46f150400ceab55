// The IDX reader: zlib's gz stream reads compressed and plain files alike.
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "rtx/data.h"
#include "rtx/error.h"
#include "rtx/ops.h"

namespace rtx::data {
namespace {

struct ElementType {
  DType dtype;
  int file_bytes;  // bytes per element in the file (big-endian)
};

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw CheckpointError("[read_idx] " + path + ": " + what);
}

ElementType element_type(uint8_t code, const std::string& path) {
  switch (code) {
    case 0x08: return {DType::UInt8, 1};
    case 0x09: return {DType::Int8, 1};
    case 0x0B: return {DType::Int32, 2};
    case 0x0C: return {DType::Int32, 4};
    case 0x0D: return {DType::Float32, 4};
    case 0x0E: return {DType::Float64, 8};
    default: fail(path, "unknown element type code " + std::to_string(code) + " in the magic number");
  }
}

class GzFile {
 public:
  explicit GzFile(const std::string& path) : path_(path), file_(gzopen(path.c_str(), "rb")) {
    if (file_ == nullptr) fail(path, std::string("cannot open: ") + std::strerror(errno));
  }
  ~GzFile() { gzclose(file_); }
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;

  // Reads up to n bytes; returns how many were read (fewer only at the end of the file).
  size_t read(void* out, size_t n) {
    size_t done = 0;
    while (done < n) {
      const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
      const int got = gzread(file_, static_cast<char*>(out) + done, chunk);
      if (got < 0) {
        int code = 0;
        fail(path_, std::string("corrupt compressed data: ") + gzerror(file_, &code));
      }
      if (got == 0) break;
      done += static_cast<size_t>(got);
    }
    return done;
  }

 private:
  std::string path_;
  gzFile file_;
};

uint32_t big_endian_u32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Reads exactly `expected` bytes in growing chunks, so a header that claims more than the file
// holds fails with "truncated" before any large allocation.
std::vector<uint8_t> read_payload(GzFile& file, size_t expected, const std::string& path) {
  std::vector<uint8_t> bytes;
  size_t chunk = 1 << 20;
  while (bytes.size() < expected) {
    const size_t want = std::min(chunk, expected - bytes.size());
    const size_t at = bytes.size();
    bytes.resize(at + want);
    const size_t got = file.read(bytes.data() + at, want);
    if (got < want) {
      fail(path, "truncated: the header promises " + std::to_string(expected) + " data bytes, the file holds " +
                     std::to_string(at + got));
    }
    chunk = std::min<size_t>(chunk * 2, 256u << 20);
  }
  uint8_t extra = 0;
  if (file.read(&extra, 1) != 0) {
    fail(path, "trailing bytes after the " + std::to_string(expected) + " data bytes the header promises");
  }
  return bytes;
}

template <typename T, typename FileT>
void decode_big_endian(const uint8_t* in, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    typename std::make_unsigned<FileT>::type bits = 0;
    for (size_t b = 0; b < sizeof(FileT); ++b) bits = static_cast<decltype(bits)>((bits << 8) | in[i * sizeof(FileT) + b]);
    FileT value;
    std::memcpy(&value, &bits, sizeof(FileT));
    out[i] = static_cast<T>(value);
  }
}

template <typename T>
void decode_big_endian_float(const uint8_t* in, T* out, int64_t n) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  for (int64_t i = 0; i < n; ++i) {
    Bits bits = 0;
    for (size_t b = 0; b < sizeof(T); ++b) bits = (bits << 8) | in[i * sizeof(T) + b];
    std::memcpy(out + i, &bits, sizeof(T));
  }
}

}  // namespace

Tensor read_idx(const std::string& path) {
  GzFile file(path);
  uint8_t magic[4];
  if (file.read(magic, 4) != 4) fail(path, "truncated: shorter than the 4-byte magic number");
  if (magic[0] != 0 || magic[1] != 0) fail(path, "not an IDX file (the magic number does not start with two zero bytes)");
  const ElementType type = element_type(magic[2], path);
  const int rank = magic[3];
  if (rank == 0) fail(path, "rank 0 in the magic number");

  std::vector<uint8_t> dims_raw(static_cast<size_t>(rank) * 4);
  if (file.read(dims_raw.data(), dims_raw.size()) != dims_raw.size()) {
    fail(path, "truncated: the header promises " + std::to_string(rank) + " dimensions");
  }
  Shape shape;
  uint64_t numel = 1;
  for (int d = 0; d < rank; ++d) {
    const uint32_t size = big_endian_u32(dims_raw.data() + 4 * d);
    shape.push_back(static_cast<int64_t>(size));
    if (size != 0 && numel > std::numeric_limits<uint64_t>::max() / 16 / size) {
      fail(path, "the header's dimensions describe more elements than can be addressed");
    }
    numel *= size;
  }
  const std::vector<uint8_t> bytes = read_payload(file, numel * type.file_bytes, path);

  Tensor out = empty(shape, TensorOptions(type.dtype));
  const auto n = static_cast<int64_t>(numel);
  if (n == 0) return out;
  switch (magic[2]) {
    case 0x08:
    case 0x09: std::memcpy(out.data_ptr(), bytes.data(), bytes.size()); break;
    case 0x0B: decode_big_endian<int32_t, int16_t>(bytes.data(), out.data_ptr<int32_t>(), n); break;
    case 0x0C: decode_big_endian<int32_t, int32_t>(bytes.data(), out.data_ptr<int32_t>(), n); break;
    case 0x0D: decode_big_endian_float(bytes.data(), out.data_ptr<float>(), n); break;
    case 0x0E: decode_big_endian_float(bytes.data(), out.data_ptr<double>(), n); break;
  }
  return out;
}

}  // namespace rtx::data
