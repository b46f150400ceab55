// Hostile input to the C++ file readers and writers: paths with a NUL byte, directories, IDX files
// whose header claims more than the file can hold (plain and gzip), IDX data decoded across the
// reader's chunks, and AtomicFile's temporary files (names, clean-up after killed saves, live saves
// left alone, discarding on errors).
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "test_utils.h"

namespace rtx::testing {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

class HostileFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rtx_hostile_files_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string write(const std::string& name, const Bytes& bytes) const {
    std::ofstream(path(name), std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return path(name);
  }
  std::string write_gzip(const std::string& name, const Bytes& bytes) const {
    gzFile f = gzopen(path(name).c_str(), "wb");
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
    return path(name);
  }
  std::string read(const std::string& name) const {
    std::ifstream in(path(name), std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::vector<std::string> files() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir_)) names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  fs::path dir_;
};

Bytes operator+(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Bytes idx_header(uint8_t type, const std::vector<uint32_t>& dims) {
  Bytes b = {0, 0, type, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) b.push_back(static_cast<uint8_t>(d >> shift));
  }
  return b;
}

TEST_F(HostileFiles, PathsWithANulByteAreRefused) {
  write("f.idx", idx_header(0x08, {1}) + Bytes{7});
  const std::string bad = path("f.idx") + std::string("\0.ignored", 9);
  EXPECT_TRUE(throws<ValueError>([&] { data::read_idx(bad); }, "[read_idx] path '" + path("f.idx") + "\\0.ignored'"));
  EXPECT_TRUE(throws<ValueError>([&] { text::BpeTokenizer::load(bad); }, "[BpeTokenizer.load]"));
  EXPECT_TRUE(throws<ValueError>([&] { text::BpeTokenizer().save(bad); }, "NUL byte"));
  EXPECT_TRUE(throws<ValueError>([&] { data::AtomicFile(bad, "op"); }, "[op] path"));
  EXPECT_EQ(files(), std::vector<std::string>{"f.idx"});
}

TEST_F(HostileFiles, IdxClaimsBeyondTheFileFailBeforeAllocating) {
  const Bytes claims = idx_header(0x0E, {65536, 65536, 2}) + Bytes{1, 2, 3};  // 64 GiB of doubles
  EXPECT_TRUE(throws<CheckpointError>([&] { data::read_idx(write("claims.idx", claims)); },
                                      "promises 68719476736 data bytes, the file holds 3"));
  EXPECT_TRUE(throws<CheckpointError>([&] { data::read_idx(write_gzip("claims.idx.gz", claims)); },
                                      "more than a gzip file of"));
  EXPECT_TRUE(throws<CheckpointError>([&] { data::read_idx(dir_.string()); }, "cannot open: Is a directory"));
}

TEST_F(HostileFiles, IdxDecodesAcrossChunksPlainAndGzip) {
  // 300000 doubles: 2.4 MB, more than the reader's 1 MiB decoding chunk.
  const uint32_t n = 300000;
  Bytes file = idx_header(0x0E, {n});
  for (uint32_t i = 0; i < n; ++i) {
    const double value = 0.5 * i - 1000.0;
    uint64_t bits = 0;
    std::memcpy(&bits, &value, 8);
    for (int shift = 56; shift >= 0; shift -= 8) file.push_back(static_cast<uint8_t>(bits >> shift));
  }
  for (const std::string& p : {write("d.idx", file), write_gzip("d.idx.gz", file)}) {
    const Tensor t = data::read_idx(p);
    ASSERT_EQ(t.shape(), (Shape{n}));
    const double* v = t.data_ptr<double>();
    EXPECT_EQ(v[0], -1000.0);
    EXPECT_EQ(v[131072], 0.5 * 131072 - 1000.0);  // the first element of the second chunk
    EXPECT_EQ(v[n - 1], 0.5 * (n - 1) - 1000.0);
  }
  // All the data, but the gzip trailer (its CRC-32 and length) cut off: not checked, so refused.
  const std::string cut = write_gzip("cut.idx.gz", file);
  fs::resize_file(cut, fs::file_size(cut) - 4);
  EXPECT_TRUE(throws<CheckpointError>([&] { data::read_idx(cut); }, "ends in the middle of its gzip stream"));
  file.pop_back();
  EXPECT_TRUE(throws<CheckpointError>([&] { data::read_idx(write_gzip("short.idx.gz", file)); },
                                      "promises 2400000 data bytes, the file holds 2399999"));
}

TEST_F(HostileFiles, AtomicFileWritesBesideTheTargetAndRenames) {
  write("t.bin", Bytes{'o', 'l', 'd'});
  {
    data::AtomicFile file(path("t.bin"), "save");
    EXPECT_EQ(file.temporary_path().substr(0, path("t.bin.rtx-partial-").size()), path("t.bin.rtx-partial-"));
    EXPECT_EQ(file.temporary_path().size(), path("t.bin.rtx-partial-").size() + 6);
    file.write("new");
    EXPECT_EQ(read("t.bin"), "old");
    file.commit();
  }
  EXPECT_EQ(read("t.bin"), "new");
  EXPECT_EQ(files(), std::vector<std::string>{"t.bin"});
  // Permissions of a new file: 0666 less the umask.
  const mode_t mask = ::umask(022);
  ::umask(mask);
  EXPECT_EQ(fs::status(path("t.bin")).permissions(), static_cast<fs::perms>(0666 & ~mask));
}

TEST_F(HostileFiles, AtomicFileNotCommittedLeavesNothing) {
  write("t.bin", Bytes{'o', 'l', 'd'});
  EXPECT_THROW(
      {
        data::AtomicFile file(path("t.bin"), "save");
        file.write("partial");
        throw std::runtime_error("the writer failed");
      },
      std::runtime_error);
  EXPECT_EQ(read("t.bin"), "old");
  EXPECT_EQ(files(), std::vector<std::string>{"t.bin"});
  EXPECT_TRUE(throws<CheckpointError>([&] { data::AtomicFile(path("no/dir/t.bin"), "save"); },
                                      "[save] " + path("no/dir/t.bin") + ": cannot create a temporary file"));
}

TEST_F(HostileFiles, AtomicFileRemovesStaleTemporariesButNotLiveOnes) {
  // Left by killed saves (no lock), of this target or another: removed. Held by a live writer
  // (locked): kept. Names AtomicFile does not make: kept.
  write("t.bin.rtx-partial-Stale1", Bytes{1});
  write("u.bin.rtx-partial-Stale2", Bytes{2});
  write("t.bin.rtx-partial-notours", Bytes{3});   // not the 6-character suffix AtomicFile makes
  write(".rtx-partial-Nonam1", Bytes{4});          // no target name
  write("t.bin.rtx-partial-Live01", Bytes{5});
  const int live = ::open(path("t.bin.rtx-partial-Live01").c_str(), O_RDONLY);
  ASSERT_GE(live, 0);
  // flock locks belong to the open file description, so this descriptor's lock stands for
  // another process's.
  ASSERT_EQ(::flock(live, LOCK_EX), 0);
  {
    data::AtomicFile file(path("t.bin"), "save");
    file.write("x");
    file.commit();
  }
  ::close(live);
  EXPECT_EQ(files(), (std::vector<std::string>{".rtx-partial-Nonam1", "t.bin", "t.bin.rtx-partial-Live01",
                                               "t.bin.rtx-partial-notours"}));
  text::BpeTokenizer().save(path("v.bpe"));  // the lock is gone now: removed as stale
  EXPECT_EQ(files(), (std::vector<std::string>{".rtx-partial-Nonam1", "t.bin", "t.bin.rtx-partial-notours", "v.bpe"}));
  EXPECT_EQ(text::BpeTokenizer::load(path("v.bpe")).vocab_size(), 256);
}

}  // namespace
}  // namespace rtx::testing
