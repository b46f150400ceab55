// Tests of the CPU max pooling, batch norm and layer norm kernels at the CNN trainer's sizes and at
// numerically hard ones: max pooling of many planes of irregular values with NaNs against loops
// (values, indices, gradients), and the one-pass statistics of batch and layer norm on values whose
// mean is a million times their spread, against two-pass float64 references.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "test_utils.h"

namespace rtx::testing {
namespace {

// Values and first-max (NaN: last NaN) row-major positions of 2x2, stride-2 max pooling of [planes, h, w].
std::pair<std::vector<double>, std::vector<double>> ref_pool2(const std::vector<double>& x, int64_t planes, int64_t h,
                                                              int64_t w) {
  const int64_t oh = h / 2, ow = w / 2;
  std::vector<double> v, idx;
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        double best = -std::numeric_limits<double>::infinity();
        int64_t at = (2 * i) * w + 2 * j;
        for (int64_t a = 0; a < 2; ++a)
          for (int64_t b = 0; b < 2; ++b) {
            const int64_t pos = (2 * i + a) * w + 2 * j + b;
            const double val = x[p * h * w + pos];
            if (val > best || std::isnan(val)) {
              best = val;
              at = pos;
            }
          }
        v.push_back(best);
        idx.push_back(static_cast<double>(at));
      }
  return {v, idx};
}

TEST(NormPoolCpuTest, MaxPoolTrainerShapesWithNaNs) {
  for (const Shape& shape : {Shape{4, 32, 28, 28}, Shape{4, 64, 14, 14}, Shape{3, 5, 9, 13}}) {
    std::vector<double> v = irregular(numel(shape), 0.7);
    for (size_t i = 17; i < v.size(); i += 389) v[i] = std::numeric_limits<double>::quiet_NaN();
    const int64_t planes = shape[0] * shape[1];
    const Shape out{shape[0], shape[1], shape[2] / 2, shape[3] / 2};
    for (DType dt : {kFloat32, kFloat64}) {
      const Tensor x = make(v, shape, Device(kCPU), dt).requires_grad_();
      const auto [ev, ei] = ref_pool2(values(x), planes, shape[2], shape[3]);
      const auto [values_out, indices] = max_pool2d_with_indices(x, {2});
      EXPECT_TRUE(all_close(values_out, make(ev, out), 0, 0)) << dtype_name(dt);
      EXPECT_TRUE(all_close(indices, make(ei, out), 0, 0)) << dtype_name(dt);
      // The gradient lands on the recorded positions only.
      const Tensor g = make(smooth(numel(out), 3), out, Device(kCPU), dt);
      values_out.backward(g);
      const std::vector<double> gv = values(g);
      std::vector<double> expected(v.size(), 0.0);
      const int64_t in_plane = shape[2] * shape[3], out_plane = out[2] * out[3];
      for (size_t i = 0; i < gv.size(); ++i)
        expected[(i / out_plane) * in_plane + static_cast<int64_t>(ei[i])] += gv[i];
      EXPECT_TRUE(all_close(x.grad(), make(expected, shape), 0, 0)) << dtype_name(dt);
    }
  }
}

// Two-pass float64 statistics of a group of values.
std::pair<double, double> ref_moments(const std::vector<double>& v) {
  double mean = 0, var = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  for (double x : v) var += (x - mean) * (x - mean);
  return {mean, var / static_cast<double>(v.size())};
}

TEST(NormPoolCpuTest, OnePassStatisticsOfALargeMean) {
  // Values 1e6 + O(1): summing x^2 would lose the variance to cancellation (1e12 against 1);
  // the sums of the values less the first one keep it exact to float64 rounding.
  const int64_t batch = 4, channels = 3, spatial = 257;
  const Shape shape{batch, channels, spatial};
  std::vector<double> v = irregular(numel(shape), 0.4);
  for (double& x : v) x += 1e6;
  const Tensor x = make(v, shape);
  std::vector<double> expected(v.size());
  for (int64_t c = 0; c < channels; ++c) {
    std::vector<double> group;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t k = 0; k < spatial; ++k) group.push_back(v[(b * channels + c) * spatial + k]);
    const auto [mean, var] = ref_moments(group);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t k = 0; k < spatial; ++k) {
        const int64_t i = (b * channels + c) * spatial + k;
        expected[i] = (v[i] - mean) / std::sqrt(var + 1e-5);
      }
  }
  EXPECT_TRUE(all_close(batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true), make(expected, shape), 1e-7, 1e-7));

  const int64_t rows = 5, n = 1031;
  std::vector<double> r = irregular(rows * n, 1.1);
  for (double& y : r) y += 1e6;
  std::vector<double> expected_rows(r.size());
  for (int64_t i = 0; i < rows; ++i) {
    const std::vector<double> row(r.begin() + i * n, r.begin() + (i + 1) * n);
    const auto [mean, var] = ref_moments(row);
    for (int64_t j = 0; j < n; ++j) expected_rows[i * n + j] = (row[j] - mean) / std::sqrt(var + 1e-5);
  }
  EXPECT_TRUE(all_close(layer_norm(make(r, {rows, n}), {n}), make(expected_rows, {rows, n}), 1e-7, 1e-7));
}

}  // namespace
}  // namespace rtx::testing
