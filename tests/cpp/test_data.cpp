// The IDX reader against files written byte by byte here: every element type, plain and gzip,
// and the malformed files it must reject; the installed Fashion-MNIST when it is present.
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "test_utils.h"

namespace rtx::testing {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

class IdxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rtx_idx_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write_plain(const std::string& name, const Bytes& bytes) const {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return path;
  }
  std::string write_gzip(const std::string& name, const Bytes& bytes) const {
    const std::string path = (dir_ / name).string();
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
    return path;
  }

  fs::path dir_;
};

// magic (type code, rank) + big-endian dims
Bytes header(uint8_t type, const std::vector<uint32_t>& dims) {
  Bytes b = {0, 0, type, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) b.push_back(static_cast<uint8_t>(d >> shift));
  }
  return b;
}

Bytes operator+(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST_F(IdxTest, ReadsUnsignedBytesPlainAndGzip) {
  const Bytes file = header(0x08, {2, 3}) + Bytes{0, 1, 2, 253, 254, 255};
  for (const std::string& path : {write_plain("u8.idx", file), write_gzip("u8.idx.gz", file)}) {
    const Tensor t = data::read_idx(path);
    EXPECT_EQ(t.dtype(), kUInt8);
    EXPECT_EQ(t.shape(), (Shape{2, 3}));
    const uint8_t* p = t.data_ptr<uint8_t>();
    EXPECT_EQ(std::vector<int>(p, p + 6), (std::vector<int>{0, 1, 2, 253, 254, 255}));
  }
}

TEST_F(IdxTest, DecodesBigEndianElementTypes) {
  {
    const Tensor t = data::read_idx(write_plain("i8.idx", header(0x09, {3}) + Bytes{0x80, 0xFF, 0x7F}));
    EXPECT_EQ(t.dtype(), kInt8);
    const int8_t* p = t.data_ptr<int8_t>();
    EXPECT_EQ(std::vector<int>(p, p + 3), (std::vector<int>{-128, -1, 127}));
  }
  {
    const Tensor t = data::read_idx(write_plain("i16.idx", header(0x0B, {3}) + Bytes{0x80, 0x00, 0xFF, 0xFE, 0x01, 0x02}));
    EXPECT_EQ(t.dtype(), kInt16);
    const int16_t* p = t.data_ptr<int16_t>();
    EXPECT_EQ(std::vector<int16_t>(p, p + 3), (std::vector<int16_t>{-32768, -2, 258}));
  }
  {
    const Tensor t = data::read_idx(write_plain("i32.idx", header(0x0C, {2}) + Bytes{0xFF, 0xFF, 0xFF, 0xFD, 0x01, 0x02, 0x03, 0x04}));
    const int32_t* p = t.data_ptr<int32_t>();
    EXPECT_EQ(std::vector<int32_t>(p, p + 2), (std::vector<int32_t>{-3, 0x01020304}));
  }
  {
    // 1.5f = 0x3FC00000, -2.0f = 0xC0000000
    const Tensor t = data::read_idx(write_plain("f32.idx", header(0x0D, {1, 2}) + Bytes{0x3F, 0xC0, 0, 0, 0xC0, 0, 0, 0}));
    EXPECT_EQ(t.dtype(), kFloat32);
    EXPECT_EQ(t.shape(), (Shape{1, 2}));
    EXPECT_EQ(t.data_ptr<float>()[0], 1.5f);
    EXPECT_EQ(t.data_ptr<float>()[1], -2.0f);
  }
  {
    // 0.1 = 0x3FB999999999999A
    const Tensor t = data::read_idx(write_plain("f64.idx", header(0x0E, {1}) + Bytes{0x3F, 0xB9, 0x99, 0x99, 0x99, 0x99, 0x99, 0x9A}));
    EXPECT_EQ(t.dtype(), kFloat64);
    EXPECT_EQ(t.data_ptr<double>()[0], 0.1);
  }
}

TEST_F(IdxTest, EmptyDimensionGivesEmptyTensor) {
  const Tensor t = data::read_idx(write_plain("empty.idx", header(0x08, {0, 28, 28})));
  EXPECT_EQ(t.shape(), (Shape{0, 28, 28}));
}

TEST_F(IdxTest, RejectsMalformedFilesNamingThem) {
  const std::vector<std::pair<Bytes, std::string>> cases = {
      {Bytes{0, 0}, "shorter than the 4-byte magic"},
      {Bytes{1, 0, 8, 1, 0, 0, 0, 1, 7}, "not an IDX file"},
      {Bytes{0, 0, 0x42, 1, 0, 0, 0, 1, 7}, "unknown element type code 66"},
      {Bytes{0, 0, 8, 0}, "rank 0"},
      {Bytes{0, 0, 8, 2, 0, 0, 0, 1}, "promises 2 dimensions"},
      {header(0x08, {4}) + Bytes{1, 2, 3}, "promises 4 data bytes, the file holds 3"},
      {header(0x08, {2}) + Bytes{1, 2, 3}, "trailing bytes"},
      // A hostile header: ~2^64 elements must fail before anything is allocated for them.
      {header(0x0E, {0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}), "more elements than can be addressed"},
      // Claims 4 GiB but holds one byte: fails as truncated, reading only what is there.
      {header(0x08, {65536, 65536}) + Bytes{1}, "truncated"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string path = write_plain("bad" + std::to_string(i) + ".idx", cases[i].first);
    const auto read = [&] { data::read_idx(path); };
    EXPECT_TRUE(throws<CheckpointError>(read, "[read_idx] " + path + ": ")) << "case " << i;
    EXPECT_TRUE(throws<CheckpointError>(read, cases[i].second)) << "case " << i;
  }
}

TEST_F(IdxTest, RejectsMissingFilesAndCorruptCompression) {
  const std::string missing = (dir_ / "nope.idx").string();
  EXPECT_TRUE(throws<CheckpointError>([&] { data::read_idx(missing); }, "[read_idx] " + missing + ": cannot open"));
  // A gzip header followed by bytes that are not a deflate stream.
  const std::string corrupt = write_plain("corrupt.gz", Bytes{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff});
  EXPECT_TRUE(throws<CheckpointError>([&] { data::read_idx(corrupt); }, "[read_idx] " + corrupt + ": "));
}

TEST(IdxFashionMnist, ReadsTheInstalledDataset) {
  const std::string dir = "/usr/share/datasets/fashion-mnist/";
  if (!fs::exists(dir + "train-labels-idx1-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)";
  }
  const Tensor images = data::read_idx(dir + "t10k-images-idx3-ubyte.gz");
  EXPECT_EQ(images.shape(), (Shape{10000, 28, 28}));
  EXPECT_EQ(images.dtype(), kUInt8);
  const Tensor labels = data::read_idx(dir + "train-labels-idx1-ubyte.gz");
  ASSERT_EQ(labels.shape(), (Shape{60000}));
  std::vector<int> counts(10, 0);
  const uint8_t* p = labels.data_ptr<uint8_t>();
  for (int64_t i = 0; i < 60000; ++i) {
    ASSERT_LT(p[i], 10);
    ++counts[p[i]];
  }
  EXPECT_EQ(counts, std::vector<int>(10, 6000));  // the training set is balanced
}

}  // namespace
}  // namespace rtx::testing
