// The IDX format reader (idx_reader.h). gzip files are inflated with zlib's stream API, which (unlike
// its gz* file functions) tells a complete stream, whose CRC-32 and length were checked, from one that
// stops early.
#include "data/idx_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <type_traits>

#include "data/path.h"
#include "rtx/error.h"

namespace rtx::data::detail {
namespace {

// deflate expands at most 1032-fold (258 bytes from a 2-bit length/distance pair), so a gzip file of
// n bytes never holds more than 1032 * n bytes of data.
constexpr uint64_t kMaxDeflateRatio = 1032;
// Multi-byte elements are decoded through a buffer of this many bytes (a multiple of every size).
constexpr size_t kChunkBytes = size_t{1} << 20;
// The file is read in pieces of this many bytes.
constexpr size_t kInputBytes = size_t{1} << 17;

uint32_t big_endian_u32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

template <typename T, typename FileT>
void decode_big_endian(const uint8_t* in, T* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    typename std::make_unsigned<FileT>::type bits = 0;
    for (size_t b = 0; b < sizeof(FileT); ++b) bits = static_cast<decltype(bits)>((bits << 8) | in[i * sizeof(FileT) + b]);
    FileT value;
    std::memcpy(&value, &bits, sizeof(FileT));
    out[i] = static_cast<T>(value);
  }
}

template <typename T>
void decode_big_endian_float(const uint8_t* in, T* out, size_t n) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  for (size_t i = 0; i < n; ++i) {
    Bits bits = 0;
    for (size_t b = 0; b < sizeof(T); ++b) bits = (bits << 8) | in[i * sizeof(T) + b];
    std::memcpy(out + i, &bits, sizeof(T));
  }
}

}  // namespace

IdxReader::File::~File() {
  if (fd >= 0) ::close(fd);
}

IdxReader::Inflater::~Inflater() {
  if (initialised) inflateEnd(&stream);
}

IdxReader::IdxReader(const std::string& path) : path_(path), input_(kInputBytes) {
  check_path(path, "read_idx");
  file_.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (file_.fd < 0) fail(std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(file_.fd, &st) != 0) fail(std::string("cannot open: ") + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) fail(std::string("cannot open: ") + std::strerror(EISDIR));
  // gzip or plain: the first two bytes tell.
  while (input_end_ < 2 && refill()) {
  }
  gzip_ = input_end_ >= 2 && input_[0] == 0x1f && input_[1] == 0x8b;
  if (gzip_) {
    if (inflateInit2(&inflater_.stream, 15 + 16) != Z_OK) fail("cannot open: out of memory for zlib");
    inflater_.initialised = true;
    inflater_.stream.next_in = input_.data();
    inflater_.stream.avail_in = static_cast<uInt>(input_end_);
  }

  uint8_t magic[4];
  if (read(magic, 4) != 4) fail("truncated: shorter than the 4-byte magic number");
  if (magic[0] != 0 || magic[1] != 0) fail("not an IDX file (the magic number does not start with two zero bytes)");
  code_ = magic[2];
  switch (code_) {
    case 0x08: dtype_ = DType::UInt8, file_bytes_ = 1; break;
    case 0x09: dtype_ = DType::Int8, file_bytes_ = 1; break;
    case 0x0B: dtype_ = DType::Int16, file_bytes_ = 2; break;
    case 0x0C: dtype_ = DType::Int32, file_bytes_ = 4; break;
    case 0x0D: dtype_ = DType::Float32, file_bytes_ = 4; break;
    case 0x0E: dtype_ = DType::Float64, file_bytes_ = 8; break;
    default: fail("unknown element type code " + std::to_string(code_) + " in the magic number");
  }
  const int rank = magic[3];
  if (rank == 0) fail("rank 0 in the magic number");

  uint8_t dims[255 * 4];
  if (read(dims, static_cast<size_t>(rank) * 4) != static_cast<size_t>(rank) * 4) {
    fail("truncated: the header promises " + std::to_string(rank) + " dimensions");
  }
  numel_ = 1;
  for (int d = 0; d < rank; ++d) {
    const uint32_t size = big_endian_u32(dims + 4 * d);
    shape_.push_back(static_cast<int64_t>(size));
    if (size != 0 && numel_ > std::numeric_limits<uint64_t>::max() / 16 / size) {
      fail("the header's dimensions describe more elements than can be addressed");
    }
    numel_ *= size;
  }

  // Nothing is allocated for data the file cannot hold.
  const uint64_t payload = numel_ * static_cast<uint64_t>(file_bytes_);
  const auto file_size = static_cast<uint64_t>(st.st_size);
  const uint64_t header_bytes = 4 + 4 * static_cast<uint64_t>(rank);
  if (S_ISREG(st.st_mode) && !gzip_ && payload > file_size - std::min(file_size, header_bytes)) {
    fail("truncated: the header promises " + std::to_string(payload) + " data bytes, the file holds " +
         std::to_string(file_size - std::min(file_size, header_bytes)));
  }
  const uint64_t gzip_capacity = file_size > std::numeric_limits<uint64_t>::max() / kMaxDeflateRatio
                                     ? std::numeric_limits<uint64_t>::max()
                                     : file_size * kMaxDeflateRatio;
  if (S_ISREG(st.st_mode) && gzip_ && payload > gzip_capacity) {
    fail("truncated: the header promises " + std::to_string(payload) + " data bytes, more than a gzip file of " +
         std::to_string(file_size) + " bytes can hold");
  }
}

void IdxReader::fail(const std::string& what) const { throw CheckpointError("[read_idx] " + path_ + ": " + what); }

bool IdxReader::refill() {
  // Plain files keep the unread rest of input_ (gzip ones have it all in the stream already).
  const size_t keep = gzip_ ? 0 : input_end_ - input_at_;
  std::memmove(input_.data(), input_.data() + input_at_, keep);
  input_at_ = 0;
  input_end_ = keep;
  ssize_t got = 0;
  do {
    got = ::read(file_.fd, input_.data() + keep, input_.size() - keep);
  } while (got < 0 && errno == EINTR);
  if (got < 0) fail(std::string("cannot read: ") + std::strerror(errno));
  input_end_ += static_cast<size_t>(got);
  return got > 0;
}

size_t IdxReader::read(void* out, size_t n) {
  auto* dst = static_cast<uint8_t*>(out);
  if (!gzip_) {
    size_t done = 0;
    while (done < n && (input_at_ < input_end_ || refill())) {
      const size_t take = std::min(n - done, input_end_ - input_at_);
      std::memcpy(dst + done, input_.data() + input_at_, take);
      input_at_ += take;
      done += take;
    }
    return done;
  }
  size_t done = 0;
  while (done < n) {
    if (inflater_.stream.avail_in == 0) {
      if (!refill()) {
        if (in_member_) fail("truncated: the compressed data ends in the middle of its gzip stream");
        break;  // the end of the last member
      }
      inflater_.stream.next_in = input_.data();
      inflater_.stream.avail_in = static_cast<uInt>(input_end_);
    }
    const size_t want = std::min<size_t>(n - done, 1u << 30);
    inflater_.stream.next_out = dst + done;
    inflater_.stream.avail_out = static_cast<uInt>(want);
    in_member_ = true;
    const int status = inflate(&inflater_.stream, Z_NO_FLUSH);
    done += want - inflater_.stream.avail_out;
    if (status == Z_STREAM_END) {
      // The member's trailer (CRC-32 and length) checked out; another member may follow.
      in_member_ = false;
      inflateReset(&inflater_.stream);
    } else if (status != Z_OK && !(status == Z_BUF_ERROR && inflater_.stream.avail_in == 0)) {
      fail(std::string("corrupt compressed data: ") + (inflater_.stream.msg != nullptr ? inflater_.stream.msg : zError(status)));
    }
  }
  return done;
}

void IdxReader::read_into(void* out) {
  const uint64_t total = numel_ * static_cast<uint64_t>(file_bytes_);
  const auto truncated = [&](uint64_t held) {
    fail("truncated: the header promises " + std::to_string(total) + " data bytes, the file holds " +
         std::to_string(held));
  };
  if (file_bytes_ == 1) {
    // The same bytes in the file and in memory.
    const size_t got = read(out, total);
    if (got < total) truncated(got);
  } else {
    std::vector<uint8_t> chunk(static_cast<size_t>(std::min<uint64_t>(kChunkBytes, total)));
    for (uint64_t done = 0; done < total;) {
      const size_t want = static_cast<size_t>(std::min<uint64_t>(chunk.size(), total - done));
      const size_t got = read(chunk.data(), want);
      if (got < want) truncated(done + got);
      const size_t first = done / file_bytes_;
      const size_t n = want / file_bytes_;
      switch (code_) {
        case 0x0B: decode_big_endian<int16_t, int16_t>(chunk.data(), static_cast<int16_t*>(out) + first, n); break;
        case 0x0C: decode_big_endian<int32_t, int32_t>(chunk.data(), static_cast<int32_t*>(out) + first, n); break;
        case 0x0D: decode_big_endian_float(chunk.data(), static_cast<float*>(out) + first, n); break;
        case 0x0E: decode_big_endian_float(chunk.data(), static_cast<double*>(out) + first, n); break;
      }
      done += want;
    }
  }
  uint8_t extra = 0;
  if (read(&extra, 1) != 0) {
    fail("trailing bytes after the " + std::to_string(total) + " data bytes the header promises");
  }
}

}  // namespace rtx::data::detail
