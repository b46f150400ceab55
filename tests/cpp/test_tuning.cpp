// Kernel tuning without a device (core/tuning.h): how candidates are timed and picked, where the
// cache's files go, what survives a reload, a damaged or unwritable file, and two caches of one model
// writing the same file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/tuning.h"

namespace fs = std::filesystem;
using rtx::detail::measure_candidates;
using rtx::detail::tune_cache_path;
using rtx::detail::TuneCache;
using rtx::detail::TuneRecord;

namespace {

// A timer over fixed per-launch times (nullopt: the candidate cannot run) that records its calls.
struct FakeTimer {
  std::vector<std::optional<double>> us;
  std::vector<std::pair<int, int>> calls;  // (candidate, reps)
  std::optional<double> operator()(int c, int reps) {
    calls.emplace_back(c, reps);
    return us[static_cast<size_t>(c)];
  }
};

std::optional<rtx::detail::TuneRecord> measure(FakeTimer& timer, int fallback) {
  return measure_candidates(static_cast<int>(timer.us.size()), fallback, std::ref(timer));
}

TEST(TuningMeasureTest, TheFastestWinsAfterTheBuiltInChoiceSizesTheTrials) {
  FakeTimer timer{{40.0, 25.0, 60.0, 31.0}, {}};
  const auto r = measure(timer, 2);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->choice, 1);
  EXPECT_DOUBLE_EQ(r->best_us, 25.0);
  EXPECT_DOUBLE_EQ(r->default_us, 60.0);
  // The probe is the built-in choice with one launch; every candidate then gets ceil(1000 / 60) = 17.
  ASSERT_EQ(timer.calls.size(), 5u);
  EXPECT_EQ(timer.calls[0], std::make_pair(2, 1));
  for (int c = 0; c < 4; ++c) EXPECT_EQ(timer.calls[c + 1], std::make_pair(c, 17));
}

TEST(TuningMeasureTest, RepetitionsStayBetweenTwoAndTwenty) {
  FakeTimer fast{{0.5, 0.4}, {}}, slow{{900.0, 800.0}, {}};
  measure(fast, 0);
  measure(slow, 0);
  EXPECT_EQ(fast.calls.back().second, 20);
  EXPECT_EQ(slow.calls.back().second, 2);
}

TEST(TuningMeasureTest, CandidatesThatCannotRunAreSkipped) {
  FakeTimer timer{{std::nullopt, 30.0, std::nullopt, 20.0}, {}};
  const auto r = measure(timer, 0);  // the built-in choice cannot run: the next one sizes the trials
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(timer.calls[0], std::make_pair(0, 1));
  EXPECT_EQ(timer.calls[1], std::make_pair(1, 1));
  EXPECT_EQ(r->choice, 3);
  EXPECT_DOUBLE_EQ(r->default_us, 0.0);  // the built-in choice has no time
}

TEST(TuningMeasureTest, NothingThatRunsMeansNoRecord) {
  FakeTimer timer{{std::nullopt, std::nullopt}, {}};
  EXPECT_FALSE(measure(timer, 1).has_value());
  EXPECT_EQ(timer.calls.size(), 2u);
}

TEST(TuningMeasureTest, AVerySlowBuiltInChoiceIsKeptUntimed) {
  FakeTimer timer{{60000.0, 10.0}, {}};
  const auto r = measure(timer, 0);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->choice, 0);
  EXPECT_DOUBLE_EQ(r->best_us, 60000.0);
  EXPECT_EQ(timer.calls.size(), 1u);  // only the probe ran
}

class TuningCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rtx_tuning_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    const char* old = std::getenv("RTX_TUNE_CACHE");
    had_old_ = old != nullptr;
    if (had_old_) old_ = old;
    ::setenv("RTX_TUNE_CACHE", (dir_ / "nested" / "cache").c_str(), 1);
  }
  void TearDown() override {
    if (had_old_) ::setenv("RTX_TUNE_CACHE", old_.c_str(), 1);
    else ::unsetenv("RTX_TUNE_CACHE");
    std::error_code ignored;
    fs::permissions(dir_ / "ro", fs::perms::owner_all, fs::perm_options::add, ignored);
    fs::remove_all(dir_, ignored);
  }
  static std::string read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  fs::path dir_;
  bool had_old_ = false;
  std::string old_;
};

TEST_F(TuningCacheTest, PathNamesTheModelInTheDirectoryOfRtxTuneCache) {
  EXPECT_EQ(tune_cache_path("NVIDIA H200 sm90 132sm"),
            (dir_ / "nested" / "cache" / "tune-NVIDIA_H200_sm90_132sm.tsv").string());
  EXPECT_EQ(tune_cache_path("a/../b\tc"), (dir_ / "nested" / "cache" / "tune-a_.._b_c.tsv").string());
  ::unsetenv("RTX_TUNE_CACHE");
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(tune_cache_path("m"), "/xdg/rustytorch/tune-m.tsv");
  ::unsetenv("XDG_CACHE_HOME");
}

TEST_F(TuningCacheTest, ChoicesSurviveAReloadAndTheDirectoryIsMade) {
  const std::string path = tune_cache_path("gpu");
  {
    TuneCache cache(path);
    EXPECT_FALSE(cache.find("gemm", "1,2,3").has_value());
    cache.store("gemm", "1,2,3", TuneRecord{3, 10.5, 12.25});
    cache.store("layer_norm_rows", "Float32 n=768 rows<=8192", TuneRecord{1, 4.0, 5.0});
    cache.store("gemm", "1,2,3", TuneRecord{2, 9.5, 12.25});  // a later measurement replaces it
  }
  ASSERT_TRUE(fs::exists(path));
  TuneCache reloaded(path);
  const auto g = reloaded.find("gemm", "1,2,3");
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->choice, 2);
  EXPECT_DOUBLE_EQ(g->best_us, 9.5);
  EXPECT_DOUBLE_EQ(g->default_us, 12.25);
  const auto l = reloaded.find("layer_norm_rows", "Float32 n=768 rows<=8192");
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->choice, 1);
  EXPECT_FALSE(reloaded.find("gemm", "1,2").has_value());
  // Nothing but the file itself is left in the directory (no temporary files).
  int files = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(path).parent_path())) files += entry.is_regular_file();
  EXPECT_EQ(files, 1);
}

TEST_F(TuningCacheTest, TwoCachesOfOneFileKeepEachOthersChoices) {
  const std::string path = tune_cache_path("gpu");
  TuneCache a(path), b(path);  // two processes' caches, both read before either wrote
  a.store("k", "a-class", TuneRecord{1, 1, 2});
  b.store("k", "b-class", TuneRecord{2, 1, 2});
  TuneCache c(path);
  EXPECT_EQ(c.find("k", "a-class")->choice, 1);
  EXPECT_EQ(c.find("k", "b-class")->choice, 2);
}

TEST_F(TuningCacheTest, MalformedLinesAreSkippedAndTheRestKept) {
  const std::string path = tune_cache_path("gpu");
  fs::create_directories(fs::path(path).parent_path());
  {
    std::ofstream out(path, std::ios::binary);
    out << "# header\n"
        << "good\tclass\t4\t1.5\t2.5\n"
        << "too\tfew\t1\n"
        << "neg\tclass\t-1\t1\t1\n"
        << "word\tclass\tthree\t1\t1\n"
        << "huge\tclass\t99999999999999999999\t1\t1\n"
        << "time\tclass\t1\tfast\t1\n"
        << "\tclass\t1\t1\t1\n"
        << std::string("\0\xff\xfe\t\t\n", 6) << "tail\tclass\t0\t3\t3";  // no final newline
  }
  TuneCache cache(path);
  EXPECT_EQ(cache.find("good", "class")->choice, 4);
  EXPECT_EQ(cache.find("tail", "class")->choice, 0);
  for (const char* bad : {"too", "neg", "word", "huge", "time", ""})
    EXPECT_FALSE(cache.find(bad, "class").has_value()) << bad;
  // The next store rewrites the file with the good lines only.
  cache.store("new", "class", TuneRecord{1, 1, 1});
  TuneCache reloaded(path);
  EXPECT_EQ(reloaded.find("good", "class")->choice, 4);
  EXPECT_EQ(reloaded.find("new", "class")->choice, 1);
  EXPECT_EQ(read(path).find("word"), std::string::npos);
}

TEST_F(TuningCacheTest, AnUnwritableDirectoryKeepsChoicesInMemory) {
  if (::geteuid() == 0) {
    // root writes anywhere: a path below a regular file cannot be made by anyone.
    fs::create_directories(dir_);
    std::ofstream(dir_ / "file") << "x";
    TuneCache cache((dir_ / "file" / "tune-gpu.tsv").string());
    cache.store("k", "c", TuneRecord{1, 1, 1});
    cache.store("k", "d", TuneRecord{2, 1, 1});  // warned once, no throw
    EXPECT_EQ(cache.find("k", "c")->choice, 1);
    EXPECT_EQ(cache.find("k", "d")->choice, 2);
    return;
  }
  fs::create_directories(dir_ / "ro");
  fs::permissions(dir_ / "ro", fs::perms::owner_read | fs::perms::owner_exec);
  TuneCache cache((dir_ / "ro" / "tune-gpu.tsv").string());
  cache.store("k", "c", TuneRecord{1, 1, 1});
  EXPECT_EQ(cache.find("k", "c")->choice, 1);
  EXPECT_FALSE(fs::exists(dir_ / "ro" / "tune-gpu.tsv"));
}

TEST_F(TuningCacheTest, AnEmptyPathKeepsChoicesInMemory) {
  TuneCache cache("");
  cache.store("k", "c", TuneRecord{5, 1, 1});
  EXPECT_EQ(cache.find("k", "c")->choice, 5);
}

}  // namespace
