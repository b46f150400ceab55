// Tests of the indexing ops (index_select, gather, scatter, scatter_add, index_add, tril, triu):
// forward against naive float64 loops over row-major positions, gradients, and every error path.
#include <cstring>
#include <random>

#include "test_utils.h"

namespace rtx::testing {
namespace {

class IndexTest : public DeviceTest {};

// f with every output squared: its gradient then depends on the inputs, so that a second-order check
// differentiates the op's backward formula (the gradient of a linear op alone is constant).
Fn squared(const Fn& f) {
  return [f](const TensorList& in) {
    TensorList outs = f(in);
    for (auto& o : outs) o = o * o;
    return outs;
  };
}

// Multiples of 1/4 in [-4, 4]: exact in every float dtype, so copies and small sums compare exactly.
std::vector<double> quarter_values(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(-16, 16);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& e : v) e = dist(gen) / 4.0;
  return v;
}

Tensor random_tensor(const Shape& shape, Device dev, DType dtype, uint32_t seed) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return make(quarter_values(n, seed), shape, dev, dtype);
}

// Nonnegative values (any dtype, unsigned included).
Tensor nonneg_tensor(const Shape& shape, Device dev, DType dtype, uint32_t seed) {
  return random_tensor(shape, dev, kFloat64, seed).abs().to(dtype);
}

std::vector<int64_t> random_indices(int64_t n, int64_t hi, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int64_t> dist(0, hi - 1);
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (auto& e : v) e = dist(gen);
  return v;
}

Tensor index_tensor(const std::vector<int64_t>& v, const Shape& shape, Device dev, DType dtype = kInt64) {
  return from_buffer(v.data(), shape, kInt64).to(dev, dtype);
}

// An index of shape whose values lie in [0, hi).
Tensor random_index(const Shape& shape, int64_t hi, Device dev, uint32_t seed, DType dtype = kInt64) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return index_tensor(random_indices(n, hi, seed), shape, dev, dtype);
}

Shape unravel(int64_t i, const Shape& shape) {
  Shape idx(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
  return idx;
}

int64_t ravel(const Shape& idx, const Shape& shape) {
  int64_t i = 0;
  for (size_t d = 0; d < shape.size(); ++d) i = i * shape[d] + idx[d];
  return i;
}

Tensor expected(const std::vector<double>& v, const Shape& shape) { return make(v, shape); }

// out[p] = x[p with p[dim] = index[p]]
std::vector<double> ref_gather(const Tensor& x, int64_t dim, const Tensor& index) {
  const auto xv = values(x), iv = values(index);
  std::vector<double> out(iv.size());
  for (size_t p = 0; p < iv.size(); ++p) {
    Shape q = unravel(static_cast<int64_t>(p), index.sizes());
    q[dim] = static_cast<int64_t>(iv[p]);
    out[p] = xv[ravel(q, x.sizes())];
  }
  return out;
}

// x with src[p] written (add: added, times alpha) at p with p[dim] = index[p], in row-major order of p.
std::vector<double> ref_scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, bool add,
                                double alpha = 1.0) {
  auto out = values(x);
  const auto iv = values(index), sv = values(src);
  for (size_t p = 0; p < iv.size(); ++p) {
    Shape q = unravel(static_cast<int64_t>(p), index.sizes());
    const double s = sv[ravel(q, src.sizes())];
    q[dim] = static_cast<int64_t>(iv[p]);
    double& o = out[ravel(q, x.sizes())];
    o = add ? o + alpha * s : s;
  }
  return out;
}

// x.index_select(dim, index)
std::vector<double> ref_index_select(const Tensor& x, int64_t dim, const Tensor& index, Shape& shape) {
  const auto xv = values(x), iv = values(index);
  shape = x.sizes();
  shape[dim] = static_cast<int64_t>(iv.size());
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t p = 0; p < n; ++p) {
    Shape q = unravel(p, shape);
    q[dim] = static_cast<int64_t>(iv[q[dim]]);
    out[p] = xv[ravel(q, x.sizes())];
  }
  return out;
}

// x.index_add(dim, index, source, alpha), sources in row-major order.
std::vector<double> ref_index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, double alpha) {
  auto out = values(x);
  const auto iv = values(index), sv = values(source);
  for (size_t p = 0; p < sv.size(); ++p) {
    Shape q = unravel(static_cast<int64_t>(p), source.sizes());
    q[dim] = static_cast<int64_t>(iv[q[dim]]);
    out[ravel(q, x.sizes())] += alpha * sv[p];
  }
  return out;
}

std::vector<double> ref_triangle(const Tensor& x, int64_t diagonal, bool upper) {
  auto out = values(x);
  for (size_t p = 0; p < out.size(); ++p) {
    const Shape q = unravel(static_cast<int64_t>(p), x.sizes());
    const int64_t c_minus_r = q[q.size() - 1] - q[q.size() - 2];
    if (upper ? c_minus_r < diagonal : c_minus_r > diagonal) out[p] = 0.0;
  }
  return out;
}

// A tensor tagged with a CUDA device over host memory: only good for device checks (never read).
Tensor fake_cuda(std::vector<float>& storage, const Shape& shape, DType dtype = kFloat32) {
  return from_blob(storage.data(), shape, {}, dtype, Device(kCUDA, 0));
}

const DType kValueDTypes[] = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kBool};

// ---- gather -----------------------------------------------------------------------------------

TEST_P(IndexTest, GatherMatchesReferenceForEveryDimAndDtype) {
  const Shape xs{4, 5, 6};
  for (int64_t dim : {0, 1, 2, -1, -3}) {
    const int64_t d = dim < 0 ? dim + 3 : dim;
    Shape is{3, 4, 5};
    is[d] = 7;  // along dim the index may be longer than the input
    for (DType dt : kValueDTypes) {
      for (DType it : {kInt64, kInt32}) {
        Tensor x = random_tensor(xs, dev(), dt, 1);
        Tensor index = random_index(is, xs[d], dev(), 2 + static_cast<uint32_t>(d), it);
        Tensor out = gather(x, dim, index);
        EXPECT_EQ(out.dtype(), dt);
        EXPECT_TRUE(all_close(out, expected(ref_gather(x, d, index), is))) << "dim " << dim << " dtype " << dt;
      }
    }
  }
}

TEST_P(IndexTest, GatherNonContiguousInputAndIndex) {
  Tensor x = random_tensor({6, 5}, dev(), kFloat32, 3).t();  // [5, 6], strides [1, 5]
  Tensor index = random_index({8, 4}, 5, dev(), 4).t();      // [4, 8], strides [1, 4]
  Tensor sliced = random_index({4, 12}, 6, dev(), 5).slice(1, 0, 12, 2);  // [4, 6], stride 2
  EXPECT_TRUE(all_close(gather(x, 0, index.slice(1, 0, 6)), expected(ref_gather(x, 0, index.slice(1, 0, 6)), {4, 6})));
  EXPECT_TRUE(all_close(gather(x, 1, sliced), expected(ref_gather(x, 1, sliced), {4, 6})));
  // An expanded index (stride 0) reads one position many times.
  Tensor expanded = index_tensor({2, 0, 4}, {1, 3}, dev()).expand({5, 3});
  EXPECT_TRUE(all_close(gather(x, 1, expanded), expected(ref_gather(x, 1, expanded), {5, 3})));
}

TEST_P(IndexTest, GatherLargeRunsInParallel) {
  Tensor x = random_tensor({400, 300}, dev(), kFloat32, 6);
  for (int64_t dim : {0, 1}) {
    Tensor index = random_index({400, 300}, dim == 0 ? 400 : 300, dev(), 7);
    EXPECT_TRUE(all_close(gather(x, dim, index), expected(ref_gather(x, dim, index), {400, 300})));
  }
}

TEST_P(IndexTest, GatherZeroSizeAndZeroDim) {
  Tensor x = random_tensor({3, 4}, dev(), kFloat32, 8);
  Tensor out = gather(x, 1, index_tensor({}, {3, 0}, dev()));
  EXPECT_EQ(out.sizes(), (Shape{3, 0}));
  Tensor empty_x = random_tensor({0, 4}, dev(), kFloat32, 8);
  EXPECT_EQ(gather(empty_x, 0, index_tensor({}, {0, 4}, dev())).sizes(), (Shape{0, 4}));
  Tensor s = scalar_tensor(2.5, TensorOptions(kFloat32, dev()));
  Tensor g = gather(s, 0, index_tensor({0}, {1}, dev()).reshape({}));
  EXPECT_EQ(g.dim(), 0);
  EXPECT_EQ(g.item<double>(), 2.5);
}

TEST_P(IndexTest, GatherErrors) {
  Tensor x = random_tensor({3, 5}, dev(), kFloat32, 9);
  EXPECT_TRUE(throws<IndexError>([&] { gather(x, 1, index_tensor({0, 7, 1}, {1, 3}, dev())); },
                                 "[gather] index 7 is out of bounds for dim 1 with size 5"));
  EXPECT_TRUE(throws<IndexError>([&] { gather(x, 1, index_tensor({0, 1, -1}, {1, 3}, dev(), kInt32)); },
                                 "[gather] index -1 is out of bounds for dim 1 with size 5"));
  // The first bad index in row-major order is the one reported.
  EXPECT_TRUE(throws<IndexError>([&] { gather(x, 0, index_tensor({0, 1, 9, 3, -4, 8}, {2, 3}, dev())); },
                                 "[gather] index 9 is out of bounds for dim 0 with size 3"));
  EXPECT_TRUE(throws<DTypeError>([&] { gather(x, 1, make({0, 1}, {1, 2}, dev())); },
                                 "[gather] index must be an int64 (or int32) tensor, got float64"));
  EXPECT_TRUE(throws<DTypeError>([&] { gather(x, 1, make({0, 1}, {1, 2}, dev(), kBool)); },
                                 "index must be an int64 (or int32) tensor, got bool"));
  EXPECT_TRUE(throws<ShapeError>([&] { gather(x, 1, index_tensor({0, 1}, {2}, dev())); },
                                 "[gather] index of shape [2] has 1 dims but the input of shape [3, 5] has 2"));
  EXPECT_TRUE(throws<ShapeError>([&] { gather(x, 1, index_tensor(std::vector<int64_t>(4, 0), {4, 1}, dev())); },
                                 "does not fit the input of shape [3, 5]: size 4 > 3 at dim 0"));
  EXPECT_TRUE(throws<IndexError>([&] { gather(x, 2, index_tensor({0}, {1, 1}, dev())); },
                                 "[gather] dim 2 out of range for a 2-d tensor"));
  std::vector<float> storage(4);
  EXPECT_TRUE(throws<DeviceError>([&] { gather(x, 1, fake_cuda(storage, {1, 1}, kInt64)); }, "[gather]"));
}

// ---- index_select -----------------------------------------------------------------------------

TEST_P(IndexTest, IndexSelectMatchesReference) {
  Tensor x = random_tensor({4, 5, 6}, dev(), kFloat32, 10);
  const std::vector<int64_t> picks{3, 0, 3, 1, 2, 2};  // duplicates allowed
  for (int64_t dim : {0, 1, 2, -1}) {
    const int64_t d = dim < 0 ? dim + 3 : dim;
    for (DType it : {kInt64, kInt32}) {
      Tensor index = index_tensor(picks, {6}, dev(), it);
      Shape shape;
      auto ref = ref_index_select(x, d, index, shape);
      EXPECT_TRUE(all_close(index_select(x, dim, index), expected(ref, shape))) << "contiguous, dim " << dim;
      Tensor xt = x.transpose(0, 2).contiguous().transpose(0, 2);  // same values, non-contiguous
      EXPECT_TRUE(all_close(index_select(xt, dim, index), expected(ref, shape))) << "strided, dim " << dim;
    }
  }
}

TEST_P(IndexTest, IndexSelectDtypesStridedIndexAndScalars) {
  for (DType dt : kValueDTypes) {
    Tensor x = random_tensor({7, 3}, dev(), dt, 11);
    Tensor index = index_tensor({6, 0, 5, 1, 4, 2}, {6}, dev()).slice(0, 0, 6, 2);  // [6, 5, 4], stride 2
    Shape shape;
    auto ref = ref_index_select(x, 0, index, shape);
    EXPECT_TRUE(all_close(index_select(x, 0, index), expected(ref, shape))) << dt;
  }
  Tensor x = random_tensor({4, 3}, dev(), kFloat64, 12);
  Tensor picked = index_select(x, 0, index_tensor({2}, {1}, dev()).reshape({}));
  EXPECT_EQ(picked.sizes(), (Shape{1, 3}));
  EXPECT_TRUE(all_close(picked, x.slice(0, 2, 3)));
  EXPECT_EQ(index_select(x, 1, index_tensor({}, {0}, dev())).sizes(), (Shape{4, 0}));
  Tensor s = scalar_tensor(1.5, TensorOptions(kFloat64, dev()));
  EXPECT_EQ(index_select(s, 0, index_tensor({0}, {1}, dev())).dim(), 0);
}

TEST_P(IndexTest, IndexSelectLarge) {
  Tensor x = random_tensor({1000, 64}, dev(), kFloat32, 13);
  Tensor index = random_index({2000}, 1000, dev(), 14);
  Shape shape;
  auto ref = ref_index_select(x, 0, index, shape);
  EXPECT_TRUE(all_close(index_select(x, 0, index), expected(ref, shape)));
  Tensor cols = random_index({50000}, 64, dev(), 15);
  auto ref_cols = ref_index_select(x.slice(0, 0, 2), 1, cols, shape);
  EXPECT_TRUE(all_close(index_select(x.slice(0, 0, 2), 1, cols), expected(ref_cols, shape)));
}

TEST_P(IndexTest, IndexSelectErrors) {
  Tensor x = random_tensor({3, 4}, dev(), kFloat32, 16);
  EXPECT_TRUE(throws<IndexError>([&] { index_select(x, 1, index_tensor({1, 4}, {2}, dev())); },
                                 "[index_select] index 4 is out of bounds for dim 1 with size 4"));
  EXPECT_TRUE(throws<IndexError>([&] { index_select(x, 0, index_tensor({-1}, {1}, dev())); },
                                 "[index_select] index -1 is out of bounds for dim 0 with size 3"));
  EXPECT_TRUE(throws<IndexError>([&] { index_select(x.t(), 0, index_tensor({0, 5}, {2}, dev())); },
                                 "[index_select] index 5 is out of bounds for dim 0 with size 4"));
  EXPECT_TRUE(throws<ShapeError>([&] { index_select(x, 0, index_tensor({0, 1}, {1, 2}, dev())); },
                                 "[index_select] index must be 0-d or 1-d, got shape [1, 2]"));
  EXPECT_TRUE(throws<DTypeError>([&] { index_select(x, 0, make({0}, {1}, dev(), kFloat32)); },
                                 "[index_select] index must be an int64 (or int32) tensor, got float32"));
  Tensor s = scalar_tensor(1.0, TensorOptions(kFloat32, dev()));
  EXPECT_TRUE(throws<ShapeError>([&] { index_select(s, 0, index_tensor({0, 0}, {2}, dev())); },
                                 "[index_select] a 0-d input takes exactly one index, got 2"));
}

// ---- scatter ----------------------------------------------------------------------------------

TEST_P(IndexTest, ScatterMatchesReferenceWithDuplicatesAndLargerSrc) {
  for (DType dt : {kFloat32, kFloat64, kFloat16, kInt64, kBool}) {
    Tensor x = random_tensor({4, 5, 6}, dev(), dt, 17);
    for (int64_t dim : {0, 1, 2, -2}) {
      const int64_t d = dim < 0 ? dim + 3 : dim;
      Shape is{3, 4, 5};
      is[d] = 8;  // more index entries than the dim holds: duplicates are certain
      Tensor index = random_index(is, x.size(d), dev(), 18);
      Tensor src = random_tensor({9, 9, 9}, dev(), dt, 19);  // larger than index everywhere
      EXPECT_TRUE(all_close(scatter(x, dim, index, src), expected(ref_scatter(x, d, index, src, false), x.sizes())))
          << "dtype " << dt << " dim " << dim;
    }
  }
}

TEST_P(IndexTest, ScatterValueAndStridedOperands) {
  Tensor x = random_tensor({6, 5}, dev(), kFloat32, 20).t();  // [5, 6] non-contiguous
  Tensor index = random_index({6, 3}, 6, dev(), 21).t();       // [3, 6] non-contiguous
  Tensor src = random_tensor({6, 4}, dev(), kFloat32, 22).t(); // [4, 6]
  EXPECT_TRUE(all_close(scatter(x, 1, index, src), expected(ref_scatter(x, 1, index, src, false), {5, 6})));
  Tensor filled = scatter(x, 1, index, Scalar(-7.5));
  Tensor value = full({3, 6}, -7.5, TensorOptions(kFloat32, dev()));
  EXPECT_TRUE(all_close(filled, expected(ref_scatter(x, 1, index, value, false), {5, 6})));
  Tensor ints = random_tensor({2, 3}, dev(), kInt64, 23);
  Tensor filled_ints = scatter(ints, 0, index_tensor({1, 0, 1}, {1, 3}, dev()), Scalar(9));
  EXPECT_EQ(filled_ints.dtype(), kInt64);
  EXPECT_TRUE(all_close(filled_ints, expected(ref_scatter(ints, 0, index_tensor({1, 0, 1}, {1, 3}, dev()),
                                                          full({1, 3}, 9, TensorOptions(kInt64)), false),
                                              {2, 3})));
  // x is not modified.
  const auto before = values(x);
  (void)scatter(x, 0, index_tensor({0}, {1, 1}, dev()), Scalar(100.0));
  EXPECT_EQ(values(x), before);
}

TEST_P(IndexTest, ScatterLastWriterInIndexOrder) {
  Tensor row = zeros({3}, TensorOptions(kFloat32, dev()));
  Tensor r = scatter(row, 0, index_tensor({2, 2, 2, 0}, {4}, dev()), make({1, 2, 3, 4}, {4}, dev(), kFloat32));
  EXPECT_EQ(values(r), (std::vector<double>{4, 0, 3}));
  Tensor cols = zeros({2, 2}, TensorOptions(kFloat32, dev()));
  Tensor c = scatter(cols, 0, index_tensor({1, 0, 1, 0, 0, 0}, {3, 2}, dev()), make({1, 2, 3, 4, 5, 6}, {3, 2}, dev(), kFloat32));
  EXPECT_EQ(values(c), (std::vector<double>{5, 6, 3, 0}));
}

TEST_P(IndexTest, ScatterErrors) {
  Tensor x = random_tensor({3, 5}, dev(), kFloat32, 24);
  Tensor src = random_tensor({3, 5}, dev(), kFloat32, 25);
  EXPECT_TRUE(throws<IndexError>([&] { scatter(x, 1, index_tensor({0, 5}, {1, 2}, dev()), src); },
                                 "[scatter] index 5 is out of bounds for dim 1 with size 5"));
  EXPECT_TRUE(throws<IndexError>([&] { scatter(x, 0, index_tensor({-2}, {1, 1}, dev()), Scalar(1.0)); },
                                 "[scatter] index -2 is out of bounds for dim 0 with size 3"));
  EXPECT_TRUE(throws<DTypeError>([&] { scatter(x, 1, index_tensor({0}, {1, 1}, dev()), src.to(kFloat64)); },
                                 "[scatter] src has dtype float64 but the input has float32"));
  EXPECT_TRUE(throws<DTypeError>([&] { scatter(x, 1, make({0}, {1, 1}, dev()), src); },
                                 "[scatter] index must be an int64 (or int32) tensor, got float64"));
  EXPECT_TRUE(throws<ShapeError>([&] { scatter(x, 1, index_tensor({0, 0, 0, 0, 0, 0}, {1, 6}, dev()), src); },
                                 "does not fit src of shape [3, 5]: size 6 > 5 at dim 1"));
  EXPECT_TRUE(throws<ShapeError>([&] { scatter(x, 1, index_tensor(std::vector<int64_t>(4, 0), {4, 1}, dev()), Scalar(1)); },
                                 "[scatter] index of shape [4, 1] does not fit the input of shape [3, 5]"));
  EXPECT_TRUE(throws<ShapeError>([&] { scatter(x, 0, index_tensor({0}, {1}, dev()), src); }, "same number of dims"));
}

// ---- scatter_add / index_add ----------------------------------------------------------------------

TEST_P(IndexTest, ScatterAddAccumulatesDuplicates) {
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8}) {
    Tensor x = nonneg_tensor({4, 5, 6}, dev(), dt, 26);
    for (int64_t dim : {0, 1, 2, -1}) {
      const int64_t d = dim < 0 ? dim + 3 : dim;
      Shape is{4, 5, 6};
      is[d] = 10;
      Tensor index = random_index(is, x.size(d), dev(), 27);
      Tensor src = nonneg_tensor(is, dev(), dt, 28);
      EXPECT_TRUE(all_close(scatter_add(x, dim, index, src), expected(ref_scatter(x, d, index, src, true), x.sizes())))
          << "dtype " << dt << " dim " << dim;
    }
  }
  Tensor b = zeros({3}, TensorOptions(kBool, dev()));
  Tensor ob = scatter_add(b, 0, index_tensor({1, 1}, {2}, dev()), make({1, 0}, {2}, dev(), kBool));
  EXPECT_EQ(values(ob), (std::vector<double>{0, 1, 0}));
}

// Each output element is summed by one thread in index order: exactly the serial float sum.
TEST_P(IndexTest, ScatterAddIsDeterministicAndOrdered) {
  const int64_t rows = 600, cols = 256;
  std::mt19937 gen(29);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> src_v(rows * cols);
  for (auto& v : src_v) v = dist(gen);
  const auto idx_v = random_indices(rows * cols, 4, 30);
  for (int64_t dim : {0, 1}) {
    Tensor src = from_buffer(src_v.data(), {rows, cols}, kFloat32).to(dev());
    Tensor index = index_tensor(idx_v, {rows, cols}, dev());
    const Shape out_shape = dim == 0 ? Shape{4, cols} : Shape{rows, 4};
    std::vector<float> ref(static_cast<size_t>(out_shape[0] * out_shape[1]), 0.0f);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const int64_t k = idx_v[i * cols + j];
        ref[dim == 0 ? k * cols + j : i * 4 + k] += src_v[i * cols + j];
      }
    Tensor out = scatter_add(zeros(out_shape, TensorOptions(kFloat32, dev())), dim, index, src);
    const auto got = out.cpu().tolist<float>();
    EXPECT_EQ(std::memcmp(got.data(), ref.data(), ref.size() * sizeof(float)), 0) << "dim " << dim;
  }
}

TEST_P(IndexTest, IndexAddMatchesReference) {
  for (DType dt : {kFloat32, kFloat64, kFloat16, kInt64}) {
    Tensor x = random_tensor({4, 5, 6}, dev(), dt, 31);
    for (int64_t dim : {0, 1, 2, -1}) {
      const int64_t d = dim < 0 ? dim + 3 : dim;
      Tensor index = index_tensor({0, 3, 0, 2, 3, 3, 1}, {7}, dev(), kInt32);
      Shape ss = x.sizes();
      ss[d] = 7;
      Tensor source = random_tensor(ss, dev(), dt, 32);
      const double alpha = is_floating(dt) ? 0.5 : 2.0;
      Tensor out = is_floating(dt) ? index_add(x, dim, index, source, 0.5) : index_add(x, dim, index, source, 2);
      EXPECT_TRUE(all_close(out, expected(ref_index_add(x, d, index, source, alpha), x.sizes())))
          << "dtype " << dt << " dim " << dim;
    }
  }
  // Strided input and source.
  Tensor x = random_tensor({6, 4}, dev(), kFloat64, 33).t();       // [4, 6]
  Tensor source = random_tensor({6, 3}, dev(), kFloat64, 34).t();  // [3, 6]
  Tensor index = index_tensor({3, 9, 1, 9, 3}, {5}, dev()).slice(0, 0, 5, 2);  // [3, 1, 3]
  EXPECT_TRUE(all_close(index_add(x, 0, index, source), expected(ref_index_add(x, 0, index, source, 1.0), {4, 6})));
}

TEST_P(IndexTest, ScatterAddAndIndexAddErrors) {
  Tensor x = random_tensor({3, 4}, dev(), kFloat32, 35);
  EXPECT_TRUE(throws<IndexError>([&] { scatter_add(x, 0, index_tensor({3}, {1, 1}, dev()), x); },
                                 "[scatter_add] index 3 is out of bounds for dim 0 with size 3"));
  EXPECT_TRUE(throws<IndexError>([&] { index_add(x, 1, index_tensor({0, -5}, {2}, dev()), x.slice(1, 0, 2)); },
                                 "[index_add] index -5 is out of bounds for dim 1 with size 4"));
  EXPECT_TRUE(throws<IndexError>([&] { index_add(x, 0, index_tensor({0, 1, 2, 3}, {4}, dev()), ones({4, 4}, TensorOptions(kFloat32, dev()))); },
                                 "[index_add] index 3 is out of bounds for dim 0 with size 3"));
  EXPECT_TRUE(throws<ShapeError>([&] { index_add(x, 0, index_tensor({0, 1}, {2}, dev()), ones({3, 4}, TensorOptions(kFloat32, dev()))); },
                                 "[index_add] source of shape [3, 4] must have the input's shape [3, 4] with the index's length 2 at dim 0"));
  EXPECT_TRUE(throws<ShapeError>([&] { index_add(x, 0, index_tensor({0, 1}, {2, 1}, dev()), x); },
                                 "[index_add] index must be 0-d or 1-d"));
  EXPECT_TRUE(throws<DTypeError>([&] { index_add(x, 0, index_tensor({0}, {1}, dev()), ones({1, 4}, TensorOptions(kFloat64, dev()))); },
                                 "[index_add] source has dtype float64 but the input has float32"));
  EXPECT_TRUE(throws<DTypeError>([&] { index_add(x, 0, make({0}, {1}, dev(), kBool), ones({1, 4}, TensorOptions(kFloat32, dev()))); },
                                 "[index_add] index must be an int64 (or int32) tensor, got bool"));
  Tensor xi = zeros({3}, TensorOptions(kInt64, dev()));
  EXPECT_TRUE(throws<DTypeError>([&] { index_add(xi, 0, index_tensor({0}, {1}, dev()), xi.slice(0, 0, 1), 0.5); },
                                 "[index_add] alpha must be an integer for an input of dtype int64, got 0.5"));
  EXPECT_TRUE(throws<DTypeError>([&] { scatter_add(x, 0, make({0}, {1, 1}, dev(), kFloat32), x); },
                                 "[scatter_add] index must be an int64 (or int32) tensor, got float32"));
  std::vector<float> storage(16);
  EXPECT_TRUE(throws<DeviceError>([&] { scatter_add(x, 0, index_tensor({0}, {1, 1}, dev()), fake_cuda(storage, {3, 4})); },
                                  "[scatter_add]"));
}

// ---- tril / triu ------------------------------------------------------------------------------

TEST_P(IndexTest, TrilTriuMatchReference) {
  for (DType dt : {kFloat32, kFloat64, kFloat16, kInt64, kBool}) {
    for (const Shape& shape : {Shape{4, 6}, Shape{6, 4}, Shape{2, 3, 5, 5}, Shape{3, 1, 7}}) {
      Tensor x = random_tensor(shape, dev(), dt, 36);
      for (int64_t k : {-7, -2, -1, 0, 1, 3, 8}) {
        EXPECT_TRUE(all_close(tril(x, k), expected(ref_triangle(x, k, false), shape))) << dt << " k " << k;
        EXPECT_TRUE(all_close(triu(x, k), expected(ref_triangle(x, k, true), shape))) << dt << " k " << k;
      }
    }
  }
  Tensor strided = random_tensor({3, 5, 4}, dev(), kFloat32, 37).transpose(1, 2);  // [3, 4, 5]
  EXPECT_TRUE(all_close(tril(strided, 1), expected(ref_triangle(strided, 1, false), {3, 4, 5})));
  EXPECT_TRUE(all_close(strided.triu(-1), expected(ref_triangle(strided, -1, true), {3, 4, 5})));
  Tensor big = random_tensor({300, 300}, dev(), kFloat32, 38);
  EXPECT_TRUE(all_close(tril(big, -3), expected(ref_triangle(big, -3, false), {300, 300})));
  EXPECT_EQ(tril(zeros({2, 0, 3})).sizes(), (Shape{2, 0, 3}));
  EXPECT_TRUE(throws<ShapeError>([&] { tril(zeros({3}, TensorOptions(kFloat32, dev()))); },
                                 "[tril] needs a tensor with at least 2 dims, got shape [3]"));
  EXPECT_TRUE(throws<ShapeError>([&] { triu(scalar_tensor(1.0, TensorOptions(kFloat32, dev()))); }, "[triu]"));
}

// ---- gradients --------------------------------------------------------------------------------

TEST_P(IndexTest, GatherAndIndexSelectGradients) {
  Tensor x = random_tensor({3, 4}, dev(), kFloat64, 39).requires_grad_();
  Tensor index = index_tensor({0, 2, 2, 1, 0, 0}, {2, 3}, dev());  // duplicates: gradients add up
  Tensor picks = index_tensor({3, 0, 3}, {3}, dev());
  Fn g = [&](const TensorList& in) { return TensorList{gather(in[0], 0, index.slice(0, 0, 2))}; };
  Fn s = [&](const TensorList& in) { return TensorList{index_select(in[0], 1, picks)}; };
  EXPECT_TRUE(gradcheck(g, {x}));
  EXPECT_TRUE(gradgradcheck(squared(g), {x}));
  EXPECT_TRUE(gradcheck(s, {x}));
  EXPECT_TRUE(gradgradcheck(squared(s), {x}));
  // The gradient counts how often each element was picked.
  Tensor y = index_select(x, 1, picks);
  Tensor gx = autograd::grad({y}, {x}, {ones_like(y)})[0];
  EXPECT_EQ(values(gx), (std::vector<double>{1, 0, 0, 2, 1, 0, 0, 2, 1, 0, 0, 2}));
}

TEST_P(IndexTest, ScatterGradients) {
  Tensor x = random_tensor({3, 4}, dev(), kFloat64, 40).requires_grad_();
  Tensor src = random_tensor({2, 5}, dev(), kFloat64, 41).requires_grad_();
  Tensor index = index_tensor({1, 0, 3, 2}, {1, 4}, dev());  // unique positions within the row
  Fn sc = [&](const TensorList& in) { return TensorList{scatter(in[0], 1, index, in[1])}; };
  Fn sv = [&](const TensorList& in) { return TensorList{scatter(in[0], 1, index, Scalar(2.0))}; };
  Fn sa = [&](const TensorList& in) { return TensorList{scatter_add(in[0], 1, index, in[1])}; };
  for (const Fn& f : {sc, sa}) {
    EXPECT_TRUE(gradcheck(f, {x, src}));
    EXPECT_TRUE(gradgradcheck(squared(f), {x, src}));
  }
  EXPECT_TRUE(gradcheck(sv, {x}));
  EXPECT_TRUE(gradgradcheck(squared(sv), {x}));
  // Overwritten elements of x get no gradient; src outside the index block gets zeros.
  Tensor y = scatter(x, 1, index, src);
  TensorList gr = autograd::grad({y}, {x, src}, {ones_like(y)});
  EXPECT_EQ(values(gr[0]), (std::vector<double>{0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(values(gr[1]), (std::vector<double>{1, 1, 1, 1, 0, 0, 0, 0, 0, 0}));
}

TEST_P(IndexTest, IndexAddAndTriangleGradients) {
  Tensor x = random_tensor({4, 3}, dev(), kFloat64, 42).requires_grad_();
  Tensor source = random_tensor({5, 3}, dev(), kFloat64, 43).requires_grad_();
  Tensor index = index_tensor({1, 3, 1, 0, 3}, {5}, dev());
  Fn ia = [&](const TensorList& in) { return TensorList{index_add(in[0], 0, index, in[1], 2.5)}; };
  EXPECT_TRUE(gradcheck(ia, {x, source}));
  EXPECT_TRUE(gradgradcheck(squared(ia), {x, source}));
  Tensor m = random_tensor({2, 3, 4}, dev(), kFloat64, 44).requires_grad_();
  Fn tl = [](const TensorList& in) { return TensorList{tril(in[0], 1)}; };
  Fn tu = [](const TensorList& in) { return TensorList{triu(in[0], -1)}; };
  for (const Fn& f : {tl, tu}) {
    EXPECT_TRUE(gradcheck(f, {m}));
    EXPECT_TRUE(gradgradcheck(squared(f), {m}));
  }
}

INSTANTIATE_DEVICE_TESTS(IndexTest);

}  // namespace
}  // namespace rtx::testing
