// Tests of the sorting ops (sort, argsort, topk): values and indices against a per-row std::stable_sort
// reference in float64 (NaN largest, ties in input order), dtypes, layouts, gradients and errors.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "test_utils.h"

namespace rtx::testing {
namespace {

class SortTest : public DeviceTest {};

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Values with many ties (multiples of 1/2 in [-2, 2]) and, when with_nan, some NaNs.
Tensor tied_tensor(const Shape& shape, Device dev, DType dtype, uint32_t seed, bool with_nan = false) {
  const int64_t n = numel(shape);
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(-4, 4);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& e : v) e = dist(gen) / 2.0;
  if (with_nan)
    for (size_t i = 3; i < v.size(); i += 7) v[i] = kNaN;
  return make(v, shape, dev, dtype);
}

// Distinct values (a shuffled range): no ties, so gradients are well defined.
Tensor distinct_tensor(const Shape& shape, Device dev, DType dtype, uint32_t seed) {
  const int64_t n = numel(shape);
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = 0.37 * static_cast<double>(i) - 3.0;
  std::shuffle(v.begin(), v.end(), std::mt19937(seed));
  return make(v, shape, dev, dtype);
}

struct Sorted {
  std::vector<double> values;
  std::vector<double> indices;
};

// Each row along dim of x stably sorted (NaN largest), keeping the first k of every row; the result
// is laid out with dim last (as values(t.transpose(dim, -1)) gives it).
Sorted ref_sort(const Tensor& x, int64_t dim, bool descending, int64_t k = -1) {
  const Tensor xt = x.dim() == 0 ? x.reshape({1}) : x.transpose(dim, -1);
  const auto v = values(xt);
  const int64_t n = xt.dim() == 0 ? 1 : xt.size(-1);
  const int64_t keep = k < 0 ? n : k;
  Sorted out;
  for (int64_t r = 0; n > 0 && r < static_cast<int64_t>(v.size()) / n; ++r) {
    std::vector<std::pair<double, int64_t>> row;
    for (int64_t j = 0; j < n; ++j) row.emplace_back(v[r * n + j], j);
    std::stable_sort(row.begin(), row.end(), [descending](const auto& a, const auto& b) {
      const bool an = std::isnan(a.first), bn = std::isnan(b.first);
      if (descending) return (an && !bn) || (!an && !bn && a.first > b.first);
      return (bn && !an) || (!an && !bn && a.first < b.first);
    });
    for (int64_t j = 0; j < keep; ++j) {
      out.values.push_back(row[j].first);
      out.indices.push_back(static_cast<double>(row[j].second));
    }
  }
  return out;
}

// t with dim moved last, as float64 values (NaN stays NaN).
std::vector<double> dim_last(const Tensor& t, int64_t dim) { return values(t.dim() == 0 ? t : t.transpose(dim, -1)); }

::testing::AssertionResult same(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "sizes " << a.size() << " != " << b.size();
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i]))))
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " != " << b[i];
  return ::testing::AssertionSuccess();
}

// ---- sort / argsort ---------------------------------------------------------------------------

TEST_P(SortTest, SortIsStableWithNaNLargest) {
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8, kBool}) {
    const bool nan = is_floating(dt);
    Tensor x = dt == kUInt8 ? tied_tensor({3, 4, 9}, dev(), kFloat64, 1).abs().to(dt) : tied_tensor({3, 4, 9}, dev(), dt, 1, nan);
    for (int64_t dim : {0, 1, 2, -1}) {
      const int64_t d = dim < 0 ? dim + 3 : dim;
      for (bool descending : {false, true}) {
        auto [v, i] = sort(x, dim, descending);
        EXPECT_EQ(v.dtype(), dt);
        EXPECT_EQ(i.dtype(), kInt64);
        EXPECT_EQ(v.sizes(), x.sizes());
        const Sorted ref = ref_sort(x, d, descending);
        EXPECT_TRUE(same(dim_last(v, d), ref.values)) << dt << " dim " << dim << " desc " << descending;
        EXPECT_TRUE(same(dim_last(i, d), ref.indices)) << dt << " dim " << dim << " desc " << descending;
        EXPECT_TRUE(same(values(argsort(x, dim, descending)), values(i)));
      }
    }
  }
}

TEST_P(SortTest, SortLayoutsAndEdgeCases) {
  Tensor x = tied_tensor({6, 5}, dev(), kFloat32, 2, true).t();  // [5, 6] non-contiguous
  for (int64_t dim : {0, 1}) {
    auto [v, i] = sort(x, dim, true);
    const Sorted ref = ref_sort(x, dim, true);
    EXPECT_TRUE(same(dim_last(v, dim), ref.values));
    EXPECT_TRUE(same(dim_last(i, dim), ref.indices));
  }
  Tensor s = scalar_tensor(3.5, TensorOptions(kFloat32, dev()));
  auto [sv, si] = sort(s);
  EXPECT_EQ(sv.dim(), 0);
  EXPECT_EQ(sv.item<double>(), 3.5);
  EXPECT_EQ(si.item<int64_t>(), 0);
  auto [ev, ei] = sort(zeros({2, 0}, TensorOptions(kFloat32, dev())), 1);
  EXPECT_EQ(ev.sizes(), (Shape{2, 0}));
  EXPECT_EQ(ei.sizes(), (Shape{2, 0}));
  // Infinities sort inside, NaN after +inf.
  const double inf = std::numeric_limits<double>::infinity();
  auto [iv, ii] = sort(make({kNaN, inf, -inf, 0.0, kNaN, -1.0}, {6}, dev(), kFloat32));
  EXPECT_TRUE(same(values(iv), {-inf, -1.0, 0.0, inf, kNaN, kNaN}));
  EXPECT_TRUE(same(values(ii), {2, 5, 3, 1, 0, 4}));
}

TEST_P(SortTest, SortLargeRows) {
  for (const Shape& shape : {Shape{4, 30000}, Shape{20000, 6}}) {
    Tensor x = tied_tensor(shape, dev(), kFloat32, 3, true);
    const int64_t dim = shape[0] == 4 ? 1 : 0;
    auto [v, i] = sort(x, dim);
    const Sorted ref = ref_sort(x, dim, false);
    EXPECT_TRUE(same(dim_last(v, dim), ref.values));
    EXPECT_TRUE(same(dim_last(i, dim), ref.indices));
  }
}

// ---- topk -------------------------------------------------------------------------------------

TEST_P(SortTest, TopkSortedMatchesReference) {
  for (DType dt : {kFloat32, kFloat64, kFloat16, kInt64, kBool}) {
    Tensor x = tied_tensor({3, 4, 70}, dev(), dt, 4, is_floating(dt));
    for (int64_t dim : {0, 2, -1}) {
      const int64_t d = dim < 0 ? dim + 3 : dim;
      for (int64_t k : {0, 1, 2, 3, 33, 50, 70}) {
        if (k > x.size(d)) continue;
        for (bool largest : {true, false}) {
          auto [v, i] = topk(x, k, dim, largest, true);
          Shape shape = x.sizes();
          shape[d] = k;
          EXPECT_EQ(v.sizes(), shape);
          const Sorted ref = ref_sort(x, d, largest, k);
          EXPECT_TRUE(same(dim_last(v, d), ref.values)) << dt << " dim " << dim << " k " << k << " largest " << largest;
          EXPECT_TRUE(same(dim_last(i, d), ref.indices)) << dt << " dim " << dim << " k " << k << " largest " << largest;
        }
      }
    }
  }
}

TEST_P(SortTest, TopkUnsortedSelectsTheSameSet) {
  Tensor x = distinct_tensor({5, 200}, dev(), kFloat64, 5).t();  // [200, 5], along dim 0 (strided)
  for (int64_t k : {7, 64, 150}) {
    for (bool largest : {true, false}) {
      auto [v, i] = topk(x, k, 0, largest, false);
      const Sorted ref = ref_sort(x, 0, largest, k);
      auto got_v = dim_last(v, 0), got_i = dim_last(i, 0);
      for (int64_t r = 0; r < 5; ++r) {
        std::vector<std::pair<double, double>> row;
        for (int64_t j = 0; j < k; ++j) row.emplace_back(got_v[r * k + j], got_i[r * k + j]);
        std::sort(row.begin(), row.end(), [largest](const auto& a, const auto& b) {
          return largest ? a.first > b.first : a.first < b.first;
        });
        for (int64_t j = 0; j < k; ++j) {
          EXPECT_EQ(row[j].first, ref.values[r * k + j]);
          EXPECT_EQ(row[j].second, ref.indices[r * k + j]);
        }
      }
    }
  }
  Tensor s = scalar_tensor(2.0, TensorOptions(kFloat64, dev()));
  auto [sv, si] = topk(s, 1);
  EXPECT_EQ(sv.dim(), 0);
  EXPECT_EQ(sv.item<double>(), 2.0);
}

// ---- errors and gradients ---------------------------------------------------------------------

TEST_P(SortTest, Errors) {
  Tensor x = tied_tensor({3, 5}, dev(), kFloat32, 6);
  EXPECT_TRUE(throws<ValueError>([&] { topk(x, 6); }, "[topk] k = 6 is out of range for dim 1 of size 5 (need 0 <= k <= 5)"));
  EXPECT_TRUE(throws<ValueError>([&] { topk(x, -1, 0); }, "[topk] k = -1 is out of range for dim 0 of size 3"));
  EXPECT_TRUE(throws<ValueError>([&] { topk(scalar_tensor(1.0), 2); }, "[topk] k = 2 is out of range for dim 0 of size 1"));
  EXPECT_TRUE(throws<IndexError>([&] { topk(x, 1, 2); }, "[topk] dim 2 out of range"));
  EXPECT_TRUE(throws<IndexError>([&] { sort(x, -3); }, "[sort] dim -3 out of range"));
  EXPECT_TRUE(throws<IndexError>([&] { argsort(x, 2); }, "[argsort] dim 2 out of range"));
  EXPECT_TRUE(throws<ValueError>([&] { sort(Tensor()); }, "[sort] input is an undefined tensor"));
}

TEST_P(SortTest, Gradients) {
  Tensor x = distinct_tensor({3, 5}, dev(), kFloat64, 7).requires_grad_();
  Fn sort_fn = [](const TensorList& in) { return TensorList{sort(in[0], 0, true).values}; };
  Fn topk_fn = [](const TensorList& in) { return TensorList{topk(in[0] * in[0], 2, 1, false).values}; };
  Fn unsorted_fn = [](const TensorList& in) { return TensorList{topk(in[0], 4, -1, true, false).values}; };
  for (const Fn& f : {sort_fn, topk_fn, unsorted_fn}) {
    EXPECT_TRUE(gradcheck(f, {x}));
    EXPECT_TRUE(gradgradcheck(squared(f), {x}));
  }
  auto [v, i] = topk(x, 2);
  EXPECT_TRUE(v.requires_grad());
  EXPECT_FALSE(i.requires_grad());
  EXPECT_FALSE(argsort(x).requires_grad());
  // The gradient lands where the values came from.
  Tensor g = autograd::grad({v}, {x}, {ones_like(v)})[0];
  const auto gv = values(g), xv = values(x.detach());
  for (int64_t r = 0; r < 3; ++r) {
    std::vector<double> row(xv.begin() + r * 5, xv.begin() + (r + 1) * 5);
    std::sort(row.begin(), row.end());
    for (int64_t j = 0; j < 5; ++j) EXPECT_EQ(gv[r * 5 + j], xv[r * 5 + j] >= row[3] ? 1.0 : 0.0);
  }
}

INSTANTIATE_DEVICE_TESTS(SortTest);


// ---- long rows ------------------------------------------------------------------------------------

// Rows at the longest a device sorts in shared memory (4096), just past it, long single rows, long
// strided rows, 64-bit keys over several rows, and every dtype in both directions.
TEST_P(SortTest, LongRowsEveryDtypeAndDirection) {
  struct Case {
    Shape shape;
    int64_t dim;
    bool transposed;
  };
  const Case cases[] = {{{3, 4096}, 1, false}, {{2, 4097}, 1, false}, {{70001}, 0, false}, {{2, 5000}, 0, true}};
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kInt8, kUInt8, kBool}) {
    for (const Case& c : cases) {
      Tensor x = dt == kUInt8 ? tied_tensor(c.shape, dev(), kFloat64, 8).abs().to(dt)
                              : tied_tensor(c.shape, dev(), dt, 8, is_floating(dt));
      if (c.transposed) x = x.t();  // [5000, 2] sorted along dim 0: rows with stride 2
      for (bool descending : {false, true}) {
        SCOPED_TRACE(::testing::Message() << dt << " " << ::testing::PrintToString(x.sizes()) << " desc " << descending);
        auto [v, i] = sort(x, c.dim, descending);
        const Sorted ref = ref_sort(x, c.dim, descending);
        EXPECT_TRUE(same(dim_last(v, c.dim), ref.values));
        EXPECT_TRUE(same(dim_last(i, c.dim), ref.indices));
      }
    }
  }
}

// Long rows select in chunks (small k: several rounds of candidates, the last chunk of a row shorter
// than k) or sort whole rows (large k); ties and NaNs everywhere.
TEST_P(SortTest, TopkLongRows) {
  for (DType dt : {kFloat32, kFloat64, kInt32, kInt8}) {
    for (const Shape& shape : {Shape{3, 10000}, Shape{1, 70001}}) {
      const Tensor x = tied_tensor(shape, dev(), dt, 9, is_floating(dt));
      for (int64_t k : {1, 17, 1000, 1025, 4097, 10000}) {
        for (bool largest : {true, false}) {
          SCOPED_TRACE(::testing::Message() << dt << " " << ::testing::PrintToString(shape) << " k " << k << " largest "
                                            << largest);
          auto [v, i] = topk(x, k, 1, largest, true);
          const Sorted ref = ref_sort(x, 1, largest, k);
          EXPECT_TRUE(same(values(v), ref.values));
          EXPECT_TRUE(same(values(i), ref.indices));
        }
      }
    }
  }
}

// -0 and +0 are equal: they keep their order (and their signs) in short and long rows.
TEST_P(SortTest, SignedZerosAreTies) {
  for (int64_t n : {6, 5001}) {
    std::vector<double> v(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) v[j] = j % 3 == 2 ? 1.0 : (j % 2 ? -0.0 : 0.0);
    for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
      const Tensor x = make(v, {n}, dev(), dt);
      for (bool descending : {false, true}) {
        auto [sv, si] = sort(x, 0, descending);
        const Sorted ref = ref_sort(x, 0, descending);
        EXPECT_TRUE(same(values(si), ref.indices)) << n << " " << dt << " desc " << descending;
        const auto got = values(sv);
        for (int64_t j = 0; j < n; ++j)
          ASSERT_EQ(std::signbit(got[j]), std::signbit(v[static_cast<size_t>(ref.indices[j])])) << n << " " << dt;
      }
    }
  }
}

}  // namespace
}  // namespace rtx::testing
