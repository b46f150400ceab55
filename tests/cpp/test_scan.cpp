// cumprod, logcumsumexp, cummax and cummin on every device: against float64 loops over lengths that
// are and are not powers of two, the tie and NaN rules of the running extremes, and gradients.
#include <limits>

#include "test_utils.h"

namespace rtx::testing {
namespace {

class ScanTest : public DeviceTest {};
INSTANTIATE_DEVICE_TESTS(ScanTest);

TEST_P(ScanTest, AgainstLoops) {
  for (int64_t n : {1, 2, 7, 8, 33}) {
    const Tensor x = randn({3, n}, TensorOptions(kFloat64, dev()));
    const std::vector<double> v = values(x);
    std::vector<double> prod(v.size()), lse(v.size()), mx(v.size()), arg(v.size());
    for (int64_t r = 0; r < 3; ++r) {
      double p = 1, l = -std::numeric_limits<double>::infinity(), m = l;
      int64_t am = 0;
      for (int64_t j = 0; j < n; ++j) {
        const size_t i = static_cast<size_t>(r * n + j);
        p *= v[i];
        l = std::max(l, v[i]) + std::log1p(std::exp(-std::abs(l - v[i])));
        if (v[i] >= m) m = v[i], am = j;
        prod[i] = p, lse[i] = l, mx[i] = m, arg[i] = static_cast<double>(am);
      }
    }
    EXPECT_TRUE(all_close(cumprod(x, 1), make(prod, {3, n}, dev()), 1e-12, 1e-12)) << n;
    EXPECT_TRUE(all_close(logcumsumexp(x, -1), make(lse, {3, n}, dev()), 1e-12, 1e-12)) << n;
    const ValuesIndices r = cummax(x, 1);
    EXPECT_EQ(values(r.values), mx) << n;
    EXPECT_EQ(values(r.indices), arg) << n;
  }
}

TEST_P(ScanTest, TiesNansAndIntegers) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const ValuesIndices r = cummax(make({1, 1, nan, 3, nan, 2}, {6}, dev()), 0);
  EXPECT_EQ(values(r.indices), (std::vector<double>{0, 1, 2, 2, 4, 4}));
  EXPECT_TRUE(std::isnan(values(r.values)[5]));
  const ValuesIndices m = cummin(tensor(std::vector<int64_t>{2, 1, 1, 3}, TensorOptions(kInt64, dev())), 0);
  EXPECT_EQ(values(m.values), (std::vector<double>{2, 1, 1, 1}));
  EXPECT_EQ(values(m.indices), (std::vector<double>{0, 1, 2, 2}));
  const Tensor b = cumprod(tensor(std::vector<bool>{true, true, false}, TensorOptions(kBool, dev())), 0);
  EXPECT_EQ(b.dtype(), kInt64);
  EXPECT_EQ(values(b), (std::vector<double>{1, 1, 0}));
  EXPECT_TRUE(throws<DTypeError>([&] { logcumsumexp(b, 0); }, "[logcumsumexp] expects a floating tensor"));
}

TEST_P(ScanTest, Gradients) {
  const Tensor x = make({0.5, -2.0, 0.0, 1.5, 3.0, -0.25}, {2, 3}, dev()).requires_grad_(true);
  const auto unary = [](std::function<Tensor(const Tensor&)> f) {
    return [f](const TensorList& in) { return TensorList{f(in[0])}; };
  };
  EXPECT_TRUE(gradcheck(unary([](const Tensor& t) { return cumprod(t, 1); }), {x}));
  EXPECT_TRUE(gradcheck(unary([](const Tensor& t) { return logcumsumexp(t, 0); }), {x}));
  EXPECT_TRUE(gradcheck(unary([](const Tensor& t) { return cummin(t, 1).values; }), {x}));
}

}  // namespace
}  // namespace rtx::testing
