// Tests of the indexing ops (index_select, gather, scatter, scatter_add, index_add, tril, triu):
// forward against naive float64 loops over row-major positions, gradients, and every error path.
#include <cstring>
#include <random>

#include "test_utils.h"

namespace rtx::testing {
namespace {

class IndexTest : public DeviceTest {};

// Nonnegative values (any dtype, unsigned included).
Tensor nonneg_tensor(const Shape& shape, Device dev, DType dtype, uint32_t seed) {
  return quarter_tensor(shape, seed, dev, kFloat64).abs().to(dtype);
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
  const int64_t n = numel(shape);
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
  const int64_t n = numel(shape);
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
        Tensor x = quarter_tensor(xs, 1, dev(), dt);
        Tensor index = random_index(is, xs[d], dev(), 2 + static_cast<uint32_t>(d), it);
        Tensor out = gather(x, dim, index);
        EXPECT_EQ(out.dtype(), dt);
        EXPECT_TRUE(all_close(out, expected(ref_gather(x, d, index), is))) << "dim " << dim << " dtype " << dt;
      }
    }
  }
}

TEST_P(IndexTest, GatherNonContiguousInputAndIndex) {
  Tensor x = quarter_tensor({6, 5}, 3, dev(), kFloat32).t();  // [5, 6], strides [1, 5]
  Tensor index = random_index({8, 4}, 5, dev(), 4).t();      // [4, 8], strides [1, 4]
  Tensor sliced = random_index({4, 12}, 6, dev(), 5).slice(1, 0, 12, 2);  // [4, 6], stride 2
  EXPECT_TRUE(all_close(gather(x, 0, index.slice(1, 0, 6)), expected(ref_gather(x, 0, index.slice(1, 0, 6)), {4, 6})));
  EXPECT_TRUE(all_close(gather(x, 1, sliced), expected(ref_gather(x, 1, sliced), {4, 6})));
  // An expanded index (stride 0) reads one position many times.
  Tensor expanded = index_tensor({2, 0, 4}, {1, 3}, dev()).expand({5, 3});
  EXPECT_TRUE(all_close(gather(x, 1, expanded), expected(ref_gather(x, 1, expanded), {5, 3})));
}

TEST_P(IndexTest, GatherLargeRunsInParallel) {
  Tensor x = quarter_tensor({400, 300}, 6, dev(), kFloat32);
  for (int64_t dim : {0, 1}) {
    Tensor index = random_index({400, 300}, dim == 0 ? 400 : 300, dev(), 7);
    EXPECT_TRUE(all_close(gather(x, dim, index), expected(ref_gather(x, dim, index), {400, 300})));
  }
}

TEST_P(IndexTest, GatherZeroSizeAndZeroDim) {
  Tensor x = quarter_tensor({3, 4}, 8, dev(), kFloat32);
  Tensor out = gather(x, 1, index_tensor({}, {3, 0}, dev()));
  EXPECT_EQ(out.sizes(), (Shape{3, 0}));
  Tensor empty_x = quarter_tensor({0, 4}, 8, dev(), kFloat32);
  EXPECT_EQ(gather(empty_x, 0, index_tensor({}, {0, 4}, dev())).sizes(), (Shape{0, 4}));
  Tensor s = scalar_tensor(2.5, TensorOptions(kFloat32, dev()));
  Tensor g = gather(s, 0, index_tensor({0}, {1}, dev()).reshape({}));
  EXPECT_EQ(g.dim(), 0);
  EXPECT_EQ(g.item<double>(), 2.5);
}

TEST_P(IndexTest, GatherErrors) {
  Tensor x = quarter_tensor({3, 5}, 9, dev(), kFloat32);
  EXPECT_TRUE(throws<IndexError>([&] { gather(x, 1, index_tensor({0, 7, 1}, {1, 3}, dev())).cpu(); },
                                 "[gather] index 7 is out of bounds for dim 1 with size 5"));
  EXPECT_TRUE(throws<IndexError>([&] { gather(x, 1, index_tensor({0, 1, -1}, {1, 3}, dev(), kInt32)).cpu(); },
                                 "[gather] index -1 is out of bounds for dim 1 with size 5"));
  // The first bad index in row-major order is the one reported.
  EXPECT_TRUE(throws<IndexError>([&] { gather(x, 0, index_tensor({0, 1, 9, 3, -4, 8}, {2, 3}, dev())).cpu(); },
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
  EXPECT_TRUE(throws<DeviceError>([&] { gather(x, 1, on_other_device(dev(), storage, {1, 1}, kInt64)); }, "[gather]"));
}

// ---- index_select -----------------------------------------------------------------------------

TEST_P(IndexTest, IndexSelectMatchesReference) {
  Tensor x = quarter_tensor({4, 5, 6}, 10, dev(), kFloat32);
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
    Tensor x = quarter_tensor({7, 3}, 11, dev(), dt);
    Tensor index = index_tensor({6, 0, 5, 1, 4, 2}, {6}, dev()).slice(0, 0, 6, 2);  // [6, 5, 4], stride 2
    Shape shape;
    auto ref = ref_index_select(x, 0, index, shape);
    EXPECT_TRUE(all_close(index_select(x, 0, index), expected(ref, shape))) << dt;
  }
  Tensor x = quarter_tensor({4, 3}, 12, dev(), kFloat64);
  Tensor picked = index_select(x, 0, index_tensor({2}, {1}, dev()).reshape({}));
  EXPECT_EQ(picked.sizes(), (Shape{1, 3}));
  EXPECT_TRUE(all_close(picked, x.slice(0, 2, 3)));
  EXPECT_EQ(index_select(x, 1, index_tensor({}, {0}, dev())).sizes(), (Shape{4, 0}));
  Tensor s = scalar_tensor(1.5, TensorOptions(kFloat64, dev()));
  EXPECT_EQ(index_select(s, 0, index_tensor({0}, {1}, dev())).dim(), 0);
}

TEST_P(IndexTest, IndexSelectLarge) {
  Tensor x = quarter_tensor({1000, 64}, 13, dev(), kFloat32);
  Tensor index = random_index({2000}, 1000, dev(), 14);
  Shape shape;
  auto ref = ref_index_select(x, 0, index, shape);
  EXPECT_TRUE(all_close(index_select(x, 0, index), expected(ref, shape)));
  Tensor cols = random_index({50000}, 64, dev(), 15);
  auto ref_cols = ref_index_select(x.slice(0, 0, 2), 1, cols, shape);
  EXPECT_TRUE(all_close(index_select(x.slice(0, 0, 2), 1, cols), expected(ref_cols, shape)));
}

TEST_P(IndexTest, IndexSelectErrors) {
  Tensor x = quarter_tensor({3, 4}, 16, dev(), kFloat32);
  EXPECT_TRUE(throws<IndexError>([&] { index_select(x, 1, index_tensor({1, 4}, {2}, dev())).cpu(); },
                                 "[index_select] index 4 is out of bounds for dim 1 with size 4"));
  EXPECT_TRUE(throws<IndexError>([&] { index_select(x, 0, index_tensor({-1}, {1}, dev())).cpu(); },
                                 "[index_select] index -1 is out of bounds for dim 0 with size 3"));
  EXPECT_TRUE(throws<IndexError>([&] { index_select(x.t(), 0, index_tensor({0, 5}, {2}, dev())).cpu(); },
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
    Tensor x = quarter_tensor({4, 5, 6}, 17, dev(), dt);
    for (int64_t dim : {0, 1, 2, -2}) {
      const int64_t d = dim < 0 ? dim + 3 : dim;
      Shape is{3, 4, 5};
      is[d] = 8;  // more index entries than the dim holds: duplicates are certain
      Tensor index = random_index(is, x.size(d), dev(), 18);
      Tensor src = quarter_tensor({9, 9, 9}, 19, dev(), dt);  // larger than index everywhere
      EXPECT_TRUE(all_close(scatter(x, dim, index, src), expected(ref_scatter(x, d, index, src, false), x.sizes())))
          << "dtype " << dt << " dim " << dim;
    }
  }
}

TEST_P(IndexTest, ScatterValueAndStridedOperands) {
  Tensor x = quarter_tensor({6, 5}, 20, dev(), kFloat32).t();  // [5, 6] non-contiguous
  Tensor index = random_index({6, 3}, 6, dev(), 21).t();       // [3, 6] non-contiguous
  Tensor src = quarter_tensor({6, 4}, 22, dev(), kFloat32).t(); // [4, 6]
  EXPECT_TRUE(all_close(scatter(x, 1, index, src), expected(ref_scatter(x, 1, index, src, false), {5, 6})));
  Tensor filled = scatter(x, 1, index, Scalar(-7.5));
  Tensor value = full({3, 6}, -7.5, TensorOptions(kFloat32, dev()));
  EXPECT_TRUE(all_close(filled, expected(ref_scatter(x, 1, index, value, false), {5, 6})));
  Tensor ints = quarter_tensor({2, 3}, 23, dev(), kInt64);
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
  Tensor x = quarter_tensor({3, 5}, 24, dev(), kFloat32);
  Tensor src = quarter_tensor({3, 5}, 25, dev(), kFloat32);
  EXPECT_TRUE(throws<IndexError>([&] { scatter(x, 1, index_tensor({0, 5}, {1, 2}, dev()), src).cpu(); },
                                 "[scatter] index 5 is out of bounds for dim 1 with size 5"));
  EXPECT_TRUE(throws<IndexError>([&] { scatter(x, 0, index_tensor({-2}, {1, 1}, dev()), Scalar(1.0)).cpu(); },
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
    Tensor x = quarter_tensor({4, 5, 6}, 31, dev(), dt);
    for (int64_t dim : {0, 1, 2, -1}) {
      const int64_t d = dim < 0 ? dim + 3 : dim;
      Tensor index = index_tensor({0, 3, 0, 2, 3, 3, 1}, {7}, dev(), kInt32);
      Shape ss = x.sizes();
      ss[d] = 7;
      Tensor source = quarter_tensor(ss, 32, dev(), dt);
      const double alpha = is_floating(dt) ? 0.5 : 2.0;
      Tensor out = is_floating(dt) ? index_add(x, dim, index, source, 0.5) : index_add(x, dim, index, source, 2);
      EXPECT_TRUE(all_close(out, expected(ref_index_add(x, d, index, source, alpha), x.sizes())))
          << "dtype " << dt << " dim " << dim;
    }
  }
  // Strided input and source.
  Tensor x = quarter_tensor({6, 4}, 33, dev(), kFloat64).t();       // [4, 6]
  Tensor source = quarter_tensor({6, 3}, 34, dev(), kFloat64).t();  // [3, 6]
  Tensor index = index_tensor({3, 9, 1, 9, 3}, {5}, dev()).slice(0, 0, 5, 2);  // [3, 1, 3]
  EXPECT_TRUE(all_close(index_add(x, 0, index, source), expected(ref_index_add(x, 0, index, source, 1.0), {4, 6})));
}

TEST_P(IndexTest, ScatterAddAndIndexAddErrors) {
  Tensor x = quarter_tensor({3, 4}, 35, dev(), kFloat32);
  EXPECT_TRUE(throws<IndexError>([&] { scatter_add(x, 0, index_tensor({3}, {1, 1}, dev()), x).cpu(); },
                                 "[scatter_add] index 3 is out of bounds for dim 0 with size 3"));
  EXPECT_TRUE(throws<IndexError>([&] { index_add(x, 1, index_tensor({0, -5}, {2}, dev()), x.slice(1, 0, 2)).cpu(); },
                                 "[index_add] index -5 is out of bounds for dim 1 with size 4"));
  EXPECT_TRUE(throws<IndexError>([&] { index_add(x, 0, index_tensor({0, 1, 2, 3}, {4}, dev()), ones({4, 4}, TensorOptions(kFloat32, dev()))).cpu(); },
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
  EXPECT_TRUE(throws<DeviceError>([&] { scatter_add(x, 0, index_tensor({0}, {1, 1}, dev()), on_other_device(dev(), storage, {3, 4})); },
                                  "[scatter_add]"));
}

// ---- tril / triu ------------------------------------------------------------------------------

TEST_P(IndexTest, TrilTriuMatchReference) {
  for (DType dt : {kFloat32, kFloat64, kFloat16, kInt64, kBool}) {
    for (const Shape& shape : {Shape{4, 6}, Shape{6, 4}, Shape{2, 3, 5, 5}, Shape{3, 1, 7}}) {
      Tensor x = quarter_tensor(shape, 36, dev(), dt);
      for (int64_t k : {-7, -2, -1, 0, 1, 3, 8}) {
        EXPECT_TRUE(all_close(tril(x, k), expected(ref_triangle(x, k, false), shape))) << dt << " k " << k;
        EXPECT_TRUE(all_close(triu(x, k), expected(ref_triangle(x, k, true), shape))) << dt << " k " << k;
      }
    }
  }
  Tensor strided = quarter_tensor({3, 5, 4}, 37, dev(), kFloat32).transpose(1, 2);  // [3, 4, 5]
  EXPECT_TRUE(all_close(tril(strided, 1), expected(ref_triangle(strided, 1, false), {3, 4, 5})));
  EXPECT_TRUE(all_close(strided.triu(-1), expected(ref_triangle(strided, -1, true), {3, 4, 5})));
  Tensor big = quarter_tensor({300, 300}, 38, dev(), kFloat32);
  EXPECT_TRUE(all_close(tril(big, -3), expected(ref_triangle(big, -3, false), {300, 300})));
  EXPECT_EQ(tril(zeros({2, 0, 3})).sizes(), (Shape{2, 0, 3}));
  EXPECT_TRUE(throws<ShapeError>([&] { tril(zeros({3}, TensorOptions(kFloat32, dev()))); },
                                 "[tril] needs a tensor with at least 2 dims, got shape [3]"));
  EXPECT_TRUE(throws<ShapeError>([&] { triu(scalar_tensor(1.0, TensorOptions(kFloat32, dev()))); }, "[triu]"));
}

// ---- gradients --------------------------------------------------------------------------------

TEST_P(IndexTest, GatherAndIndexSelectGradients) {
  Tensor x = quarter_tensor({3, 4}, 39, dev(), kFloat64).requires_grad_();
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
  Tensor x = quarter_tensor({3, 4}, 40, dev(), kFloat64).requires_grad_();
  Tensor src = quarter_tensor({2, 5}, 41, dev(), kFloat64).requires_grad_();
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
  Tensor x = quarter_tensor({4, 3}, 42, dev(), kFloat64).requires_grad_();
  Tensor source = quarter_tensor({5, 3}, 43, dev(), kFloat64).requires_grad_();
  Tensor index = index_tensor({1, 3, 1, 0, 3}, {5}, dev());
  Fn ia = [&](const TensorList& in) { return TensorList{index_add(in[0], 0, index, in[1], 2.5)}; };
  EXPECT_TRUE(gradcheck(ia, {x, source}));
  EXPECT_TRUE(gradgradcheck(squared(ia), {x, source}));
  Tensor m = quarter_tensor({2, 3, 4}, 44, dev(), kFloat64).requires_grad_();
  Fn tl = [](const TensorList& in) { return TensorList{tril(in[0], 1)}; };
  Fn tu = [](const TensorList& in) { return TensorList{triu(in[0], -1)}; };
  for (const Fn& f : {tl, tu}) {
    EXPECT_TRUE(gradcheck(f, {m}));
    EXPECT_TRUE(gradgradcheck(squared(f), {m}));
  }
}

TEST_P(IndexTest, NonzeroListsCoordinatesInRowMajorOrder) {
  for (const Shape& shape : {Shape{9}, Shape{3, 4}, Shape{2, 3, 5}}) {
    const std::vector<double> v = quarters(numel(shape), 41);  // zeros among them
    const Tensor x = make(v, shape, dev());
    std::vector<double> expected;
    for (int64_t i = 0; i < numel(shape); ++i) {
      if (v[static_cast<size_t>(i)] == 0) continue;
      for (int64_t c : unravel(i, shape)) expected.push_back(static_cast<double>(c));
    }
    const Tensor nz = nonzero(x);
    EXPECT_EQ(nz.dtype(), kInt64);
    EXPECT_EQ(nz.sizes(), Shape({static_cast<int64_t>(expected.size()) / x.dim(), x.dim()}));
    EXPECT_EQ(values(nz), expected);
    EXPECT_EQ(values(nonzero(x != 0)), expected);
    EXPECT_EQ(values(nonzero((x * 4).to(kInt32))), expected);
    // Strided input: coordinates of the view, not of its storage.
    const Tensor t = x.dim() == 2 ? x.t() : x;
    std::vector<double> expected_t;
    const std::vector<double> tv = values(t);
    for (int64_t i = 0; i < t.numel(); ++i)
      if (tv[static_cast<size_t>(i)] != 0)
        for (int64_t c : unravel(i, t.sizes())) expected_t.push_back(static_cast<double>(c));
    EXPECT_EQ(values(nonzero(t)), expected_t);
  }
  EXPECT_EQ(nonzero(make({1.5}, {}, dev())).sizes(), Shape({1, 0}));
  EXPECT_EQ(nonzero(make({0}, {}, dev())).sizes(), Shape({0, 0}));
  EXPECT_EQ(nonzero(zeros({2, 0, 3}, TensorOptions(kFloat32, dev()))).sizes(), Shape({0, 3}));
  EXPECT_EQ(nonzero(zeros({4, 2}, TensorOptions(kBool, dev()))).sizes(), Shape({0, 2}));
  EXPECT_EQ(values(nonzero(make({0, NAN, 2}, {3}, dev()))), (std::vector<double>{1, 2}));
  EXPECT_TRUE(throws<ValueError>([] { nonzero(Tensor()); }, "[nonzero]"));
}

TEST_P(IndexTest, MaskedSelectBroadcastsAndIsDifferentiable) {
  const Tensor x = make({1, 2, 3, 4, 5, 6}, {2, 3}, dev());
  const Tensor row = make({1, 0, 1}, {3}, dev()).to(kBool);
  EXPECT_EQ(values(masked_select(x, row)), (std::vector<double>{1, 3, 4, 6}));
  EXPECT_EQ(values(masked_select(x, x > 2.5)), (std::vector<double>{3, 4, 5, 6}));
  EXPECT_EQ(masked_select(x, zeros({2, 3}, TensorOptions(kBool, dev()))).sizes(), Shape({0}));
  // A mask wider than the input broadcasts it.
  const Tensor column = make({1, 0}, {2, 1}, dev()).to(kBool);
  EXPECT_EQ(values(masked_select(make({7, 8, 9}, {3}, dev()), column)), (std::vector<double>{7, 8, 9}));
  Tensor leaf_x = quarter_tensor({2, 3}, 43, dev(), kFloat64).requires_grad_();
  const Fn f = [&](const TensorList& in) { return TensorList{masked_select(in[0], row)}; };
  EXPECT_TRUE(gradcheck(f, {leaf_x}));
  EXPECT_TRUE(gradgradcheck(squared(f), {leaf_x}));
  EXPECT_TRUE(throws<DTypeError>([&] { masked_select(x, x); }, "[masked_select] mask must be a bool tensor"));
  EXPECT_TRUE(throws<ShapeError>([&] { masked_select(x, make({1, 0}, {2}, dev()).to(kBool)); }, "masked_select"));
}

INSTANTIATE_DEVICE_TESTS(IndexTest);


// ---- every device path against the CPU, and faults -----------------------------------------------

// Values whose sums round (so that the order of accumulation shows), or small integers.
Tensor summand_tensor(const Shape& shape, DType dtype, uint32_t seed) {
  if (!is_floating(dtype)) return nonneg_tensor(shape, Device(kCPU), dtype, seed);
  manual_seed(seed);
  return randn(shape, TensorOptions(kFloat64)).to(dtype);
}

// Scatters with few updates per row (one thread walks each row), long rows over few rows (sorted by
// destination), long rows over many rows (walked), and an index shared by every row (sorted once):
// the same bits as the CPU, which applies updates in index order.
TEST_P(IndexTest, ScatterPathsMatchCpuBitwise) {
  if (dev().is_cpu()) GTEST_SKIP() << "compares the CUDA kernels against the CPU's";
  struct Case {
    Shape x, index;
    int64_t dim;
  };
  const Case cases[] = {{{40000, 5}, {40000, 3}, 1},
                        {{7, 300}, {500, 300}, 0},
                        {{100, 9}, {100, 400}, 1},
                        {{5, 33000}, {40, 33000}, 0},
                        {{4, 6, 50}, {4, 200, 50}, 1}};
  for (DType dt : {kFloat32, kFloat16, kBFloat16, kFloat64, kInt64, kUInt8, kBool}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(::testing::Message() << dt << " index " << ::testing::PrintToString(c.index) << " dim " << c.dim);
      const Tensor x = summand_tensor(c.x, dt, 41), src = summand_tensor(c.index, dt, 42);
      const Tensor index = random_index(c.index, c.x[c.dim], Device(kCPU), 43);
      const Tensor xd = x.to(dev()), id = index.to(dev()), sd = src.to(dev());
      EXPECT_TRUE(same_bytes(scatter(xd, c.dim, id, sd), scatter(x, c.dim, index, src)));
      EXPECT_TRUE(same_bytes(scatter_add(xd, c.dim, id, sd), scatter_add(x, c.dim, index, src)));
    }
    // index_add: one index for every row, along the first and the last dim.
    const Tensor index = random_index({1000}, 50, Device(kCPU), 44, kInt32);
    for (int64_t dim : {0, 1}) {
      const Shape xs = dim == 0 ? Shape{50, 64} : Shape{64, 50}, ss = dim == 0 ? Shape{1000, 64} : Shape{64, 1000};
      const Tensor x = summand_tensor(xs, dt, 45), source = summand_tensor(ss, dt, 46);
      const Scalar alpha = is_floating(dt) ? Scalar(0.75) : Scalar(1);
      EXPECT_TRUE(same_bytes(index_add(x.to(dev()), dim, index.to(dev()), source.to(dev()), alpha),
                             index_add(x, dim, index, source, alpha)))
          << dt << " dim " << dim;
    }
    // An expanded index (stride 0 across rows) is shared too, for assignment as well.
    const Tensor expanded = random_index({1, 100}, 20, Device(kCPU), 47).expand({8, 100});
    const Tensor x = summand_tensor({8, 20}, dt, 48), src = summand_tensor({8, 100}, dt, 49);
    EXPECT_TRUE(same_bytes(scatter(x.to(dev()), 1, expanded.to(dev()), src.to(dev())), scatter(x, 1, expanded, src)))
        << dt;
    EXPECT_TRUE(same_bytes(scatter_add(x.to(dev()), 1, expanded.to(dev()), src.to(dev())),
                           scatter_add(x, 1, expanded, src)))
        << dt;
  }
}

// Two bad indices on every path: the one first in the index's row-major order is reported (on CUDA at
// the next synchronization, here .cpu()), whichever a device meets first, and the device stays usable.
TEST_P(IndexTest, FirstBadIndexInRowMajorOrderOnEveryPath) {
  // An index of shape with values in [0, hi) but the given (flat position, value) pairs.
  auto with_bad = [&](const Shape& shape, int64_t hi, const std::vector<std::pair<int64_t, int64_t>>& bad) {
    const int64_t n = numel(shape);
    auto v = random_indices(n, hi, 50);
    for (const auto& [p, value] : bad) v[static_cast<size_t>(p)] = value;
    return index_tensor(v, shape, dev());
  };
  const Tensor x = quarter_tensor({100, 300}, 51, dev(), kFloat32);
  EXPECT_TRUE(throws<IndexError>([&] { gather(x, 1, with_bad({100, 300}, 300, {{50 * 300 + 10, 999}, {3 * 300 + 299, -7}})).cpu(); },
                                 "[gather] index -7 is out of bounds for dim 1 with size 300"));
  const Tensor rows = quarter_tensor({300, 8}, 52, dev(), kFloat32);
  const Tensor picks = with_bad({2000}, 300, {{1500, 300}, {1700, -1}});
  EXPECT_TRUE(throws<IndexError>([&] { index_select(rows, 0, picks).cpu(); },
                                 "[index_select] index 300 is out of bounds for dim 0 with size 300"));
  EXPECT_TRUE(throws<IndexError>([&] { index_select(rows.t().contiguous().t(), 0, picks).cpu(); },
                                 "[index_select] index 300 is out of bounds for dim 0 with size 300"));
  const Tensor narrow_x = quarter_tensor({40000, 5}, 53, dev(), kFloat32);
  const Tensor walked = with_bad({40000, 3}, 5, {{39000 * 3 + 1, 5}, {20000 * 3 + 2, -2}});
  EXPECT_TRUE(throws<IndexError>([&] { scatter(narrow_x, 1, walked, narrow_x).cpu(); },
                                 "[scatter] index -2 is out of bounds for dim 1 with size 5"));
  const Tensor few = quarter_tensor({7, 300}, 54, dev(), kFloat32), src = quarter_tensor({500, 300}, 55, dev(), kFloat32);
  const Tensor sorted = with_bad({500, 300}, 7, {{499 * 300, 70}, {250 * 300 + 7, -3}});
  EXPECT_TRUE(throws<IndexError>([&] { scatter(few, 0, sorted, src).cpu(); },
                                 "[scatter] index -3 is out of bounds for dim 0 with size 7"));
  EXPECT_TRUE(throws<IndexError>([&] { scatter_add(few, 0, sorted, src).cpu(); },
                                 "[scatter_add] index -3 is out of bounds for dim 0 with size 7"));
  const Tensor shared = with_bad({1000}, 50, {{600, 77}, {900, -1}});
  EXPECT_TRUE(throws<IndexError>(
      [&] { index_add(quarter_tensor({50, 64}, 56, dev(), kFloat32), 0, shared, quarter_tensor({1000, 64}, 57, dev(), kFloat32)).cpu(); },
      "[index_add] index 77 is out of bounds for dim 0 with size 50"));
  EXPECT_TRUE(throws<IndexError>(
      [&] { index_add(quarter_tensor({64, 50}, 58, dev(), kFloat32), 1, shared, quarter_tensor({64, 1000}, 59, dev(), kFloat32)).cpu(); },
      "[index_add] index 77 is out of bounds for dim 1 with size 50"));
  const Tensor valid = random_index({100, 300}, 300, dev(), 60);
  EXPECT_TRUE(all_close(gather(x, 1, valid), expected(ref_gather(x, 1, valid), {100, 300})));
}

TEST_P(IndexTest, TrilTriuLargeAndStridedMatchCpu) {
  if (dev().is_cpu()) GTEST_SKIP() << "compares the CUDA kernels against the CPU's";
  for (DType dt : {kFloat32, kFloat16, kFloat64, kInt8, kBool}) {
    const Tensor base = quarter_tensor({3, 600, 500}, 61, Device(kCPU), dt);
    const Tensor x = base.transpose(1, 2), xd = base.to(dev()).transpose(1, 2);  // [3, 500, 600], strided
    for (int64_t k : {-100, 0, 7, 650}) {
      EXPECT_TRUE(same_bytes(tril(xd, k), tril(x, k))) << dt << " k " << k;
      EXPECT_TRUE(same_bytes(triu(xd, k), triu(x, k))) << dt << " k " << k;
    }
  }
}

}  // namespace
}  // namespace rtx::testing
