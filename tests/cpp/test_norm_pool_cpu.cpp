// Tests of the CPU max pooling, batch norm and layer norm kernels at the CNN trainer's sizes and at
// numerically hard ones: max pooling of many planes of irregular values with NaNs and of tied values
// in float and integer dtypes against loops (values, indices, gradients), batch norm in training mode
// (outputs, running statistics, gradients) at sizes that split its work into several blocks against
// float64 loops, the same bits for one and two threads, and the one-pass statistics of batch and
// layer norm on values whose mean is a million times their spread, against two-pass float64
// references.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "test_utils.h"

namespace rtx::testing {
namespace {

// Values and first-max (NaN: last NaN) row-major positions of 2x2, stride-2 max pooling of [planes, h, w];
// with ceil_mode, a last partial window where h or w is odd.
std::pair<std::vector<double>, std::vector<double>> ref_pool2(const std::vector<double>& x, int64_t planes, int64_t h,
                                                              int64_t w, bool ceil_mode = false) {
  const int64_t oh = ceil_mode ? (h + 1) / 2 : h / 2, ow = ceil_mode ? (w + 1) / 2 : w / 2;
  std::vector<double> v, idx;
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        double best = -std::numeric_limits<double>::infinity();
        int64_t at = (2 * i) * w + 2 * j;
        for (int64_t a = 0; a < 2 && 2 * i + a < h; ++a)
          for (int64_t b = 0; b < 2 && 2 * j + b < w; ++b) {
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

// x of shape [n, c, h, w] as a non-contiguous view of a [n, h, w, c] tensor.
Tensor channels_last_view(const std::vector<double>& v, const Shape& shape, DType dt) {
  const Tensor nchw = make(v, shape);
  return make(values(nchw.permute({0, 2, 3, 1})), {shape[0], shape[2], shape[3], shape[1]}, Device(kCPU), dt)
      .permute({0, 3, 1, 2});
}

TEST(NormPoolCpuTest, MaxPoolTiesIntegersLayoutsAndPartialWindows) {
  // Values in steps of 0.25 (small integers for the integer dtypes): most windows hold ties, which
  // keep the first position in row-major order. Output rows of 4, 8, 19 and 2 (floor mode) and 5,
  // 8, 19 and 3 (ceil mode, partial windows at odd edges).
  for (const Shape& shape : {Shape{2, 3, 7, 9}, Shape{3, 2, 6, 16}, Shape{1, 2, 5, 38}, Shape{1, 1, 3, 5}}) {
    const int64_t planes = shape[0] * shape[1];
    for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt8, kInt32, kInt64}) {
      const double scale = dt == kInt8 || dt == kInt32 || dt == kInt64 ? 4.0 : 1.0;
      const std::vector<double> v = quarters(numel(shape), 5, scale);
      for (bool ceil_mode : {false, true}) {
        const auto [ev, ei] = ref_pool2(v, planes, shape[2], shape[3], ceil_mode);
        const Shape out{shape[0], shape[1], ceil_mode ? (shape[2] + 1) / 2 : shape[2] / 2,
                        ceil_mode ? (shape[3] + 1) / 2 : shape[3] / 2};
        for (const Tensor& x : {make(v, shape, Device(kCPU), dt), channels_last_view(v, shape, dt)}) {
          const auto [values_out, indices] = max_pool2d_with_indices(x, {2}, {2}, {0, 0}, {1, 1}, ceil_mode);
          EXPECT_EQ(values_out.dtype(), dt);
          EXPECT_TRUE(all_close(values_out, make(ev, out), 0, 0)) << dtype_name(dt) << " ceil " << ceil_mode;
          EXPECT_TRUE(all_close(indices, make(ei, out), 0, 0)) << dtype_name(dt) << " ceil " << ceil_mode;
        }
      }
    }
  }
}

// f() with the CPU backend on `threads` threads.
template <typename F>
auto with_threads(int threads, const F& f) {
  const int saved = get_num_threads();
  set_num_threads(threads);
  auto r = f();
  set_num_threads(saved);
  return r;
}

TEST(NormPoolCpuTest, MaxPoolSameBitsForOneAndTwoThreads) {
  const Shape shape{4, 32, 28, 28};
  const std::vector<double> v = quarters(numel(shape), 9);
  auto run = [&] {
    const Tensor x = make(v, shape, Device(kCPU), kFloat32).requires_grad_();
    const auto [values_out, indices] = max_pool2d_with_indices(x, {2});
    values_out.backward(make(smooth(values_out.numel(), 4), values_out.sizes(), Device(kCPU), kFloat32));
    return TensorList{values_out, indices, x.grad()};
  };
  const TensorList one = with_threads(1, run), two = with_threads(2, run);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(same_bytes(one[i], two[i])) << i;
}

// Batch norm in training mode in float64 loops: the output, the running statistics after one update
// and the gradients for an output gradient g, of x [batch, channels, spatial].
struct BatchNormReference {
  std::vector<double> out, running_mean, running_var, grad_x, grad_weight, grad_bias;
};
BatchNormReference ref_batch_norm_training(const std::vector<double>& x, const std::vector<double>& g,
                                           const std::vector<double>& w, const std::vector<double>& b,
                                           const std::vector<double>& rm, const std::vector<double>& rv,
                                           int64_t batch, int64_t channels, int64_t spatial, double momentum,
                                           double eps) {
  BatchNormReference r{std::vector<double>(x.size()), rm, rv, std::vector<double>(x.size()),
                       std::vector<double>(channels), std::vector<double>(channels)};
  const double count = static_cast<double>(batch * spatial);
  auto each = [&](int64_t c, const std::function<void(int64_t)>& f) {
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t s = 0; s < spatial; ++s) f((n * channels + c) * spatial + s);
  };
  for (int64_t c = 0; c < channels; ++c) {
    double mean = 0, var = 0;
    each(c, [&](int64_t i) { mean += x[i]; });
    mean /= count;
    each(c, [&](int64_t i) { var += (x[i] - mean) * (x[i] - mean); });
    var /= count;
    const double rstd = 1.0 / std::sqrt(var + eps);
    r.running_mean[c] = (1 - momentum) * rm[c] + momentum * mean;
    r.running_var[c] = (1 - momentum) * rv[c] + momentum * var * count / (count - 1);
    each(c, [&](int64_t i) {
      const double xhat = (x[i] - mean) * rstd;
      r.out[i] = xhat * w[c] + b[c];
      r.grad_bias[c] += g[i];
      r.grad_weight[c] += g[i] * xhat;
    });
    each(c, [&](int64_t i) {
      const double xhat = (x[i] - mean) * rstd;
      r.grad_x[i] = w[c] * rstd * (g[i] - r.grad_bias[c] / count - xhat * r.grad_weight[c] / count);
    });
  }
  return r;
}

TEST(NormPoolCpuTest, BatchNormTrainingAgainstFloat64Loops) {
  // Shapes that split the statistics and gradient sums into several blocks of samples, of channels
  // (19 > 16) and of long runs (40000 per sample and channel), odd sizes, one value per sample and
  // channel (BatchNorm1d), and a non-contiguous input.
  for (const Shape& shape : {Shape{150, 19, 5, 3}, Shape{2, 3, 200, 200}, Shape{1500, 3, 1, 1}, Shape{3, 5, 3, 7}}) {
    const int64_t batch = shape[0], channels = shape[1], spatial = shape[2] * shape[3];
    const std::vector<double> v = irregular(numel(shape), 0.3), g = smooth(numel(shape), 8);
    const std::vector<double> w = irregular(channels, 1.0), b = irregular(channels, 2.0);
    const std::vector<double> rm0 = irregular(channels, 3.0), rv0(channels, 1.5);
    for (DType dt : {kFloat32, kFloat64}) {
      for (bool channels_last : {false, true}) {
        // The reference runs on the inputs as rounded to dt.
        const Tensor x = (channels_last ? channels_last_view(v, shape, dt) : make(v, shape, Device(kCPU), dt));
        const Tensor gt = make(g, shape, Device(kCPU), dt);
        const BatchNormReference e = ref_batch_norm_training(values(x), values(gt), w, b, rm0, rv0, batch, channels,
                                                             spatial, 0.1, 1e-5);
        Tensor rm = make(rm0, {channels}, Device(kCPU), dt), rv = make(rv0, {channels}, Device(kCPU), dt);
        const Tensor xl = x.detach().requires_grad_();
        const Tensor wt = make(w, {channels}, Device(kCPU), dt).requires_grad_();
        const Tensor bt = make(b, {channels}, Device(kCPU), dt).requires_grad_();
        const Tensor y = batch_norm(xl, rm, rv, wt, bt, true, 0.1, 1e-5);
        y.backward(gt);
        const double tol = dt == kFloat32 ? 1e-5 : 1e-10;
        const std::string what = std::string(dtype_name(dt)) + " " + ::testing::PrintToString(shape);
        EXPECT_TRUE(all_close(y, make(e.out, shape), tol, tol)) << what;
        EXPECT_TRUE(all_close(rm, make(e.running_mean, {channels}), tol, tol)) << what;
        EXPECT_TRUE(all_close(rv, make(e.running_var, {channels}), tol, tol)) << what;
        EXPECT_TRUE(all_close(xl.grad(), make(e.grad_x, shape), tol, tol)) << what;
        // Sums over up to 240000 values: tolerances grow with their square root.
        const double sum_tol = tol * std::sqrt(static_cast<double>(batch * spatial));
        EXPECT_TRUE(all_close(wt.grad(), make(e.grad_weight, {channels}), tol, sum_tol)) << what;
        EXPECT_TRUE(all_close(bt.grad(), make(e.grad_bias, {channels}), tol, sum_tol)) << what;
      }
    }
  }
}

TEST(NormPoolCpuTest, BatchNormSameBitsForOneAndTwoThreads) {
  for (const Shape& shape : {Shape{128, 32, 28, 28}, Shape{2, 3, 200, 200}}) {
    const int64_t channels = shape[1];
    const std::vector<double> v = irregular(numel(shape), 0.9), g = smooth(numel(shape), 2);
    auto run = [&] {
      const Tensor x = make(v, shape, Device(kCPU), kFloat32).requires_grad_();
      const Tensor w = make(irregular(channels, 1.0), {channels}, Device(kCPU), kFloat32).requires_grad_();
      const Tensor b = zeros({channels}, TensorOptions(kFloat32)).requires_grad_();
      Tensor rm = zeros({channels}, TensorOptions(kFloat32)), rv = ones({channels}, TensorOptions(kFloat32));
      const Tensor y = batch_norm(x, rm, rv, w, b, true, 0.1, 1e-5);
      y.backward(make(g, shape, Device(kCPU), kFloat32));
      return TensorList{y, rm, rv, x.grad(), w.grad(), b.grad()};
    };
    const TensorList one = with_threads(1, run), two = with_threads(2, run);
    for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(same_bytes(one[i], two[i])) << i;
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
