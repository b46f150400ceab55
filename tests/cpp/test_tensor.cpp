// Tensor basics: creation ops, metadata, item, dtype conversions, copy_/fill_/zero_, clone and
// contiguous, the version counter, and printing.
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>

#include "test_utils.h"

namespace rtx::testing {
namespace {

class TensorTest : public DeviceTest {};
INSTANTIATE_DEVICE_TESTS(TensorTest);

const DType kAllDTypes[] = {kBool, kUInt8, kInt8, kInt16, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64};

// A host tensor of dtype T holding v exactly (no conversion through the library).
template <typename T>
Tensor host_tensor(const std::vector<T>& v, const Shape& shape) {
  return from_buffer(v.data(), shape, dtype_of_v<T>);
}

// Row-major values of a float64 CPU tensor read through its strides (independent of the copy kernels).
std::vector<double> strided(const Tensor& t) {
  const double* base = static_cast<const double*>(t.data_ptr());
  std::vector<double> out;
  Shape idx(t.dim(), 0);
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t off = 0;
    for (int64_t d = 0; d < t.dim(); ++d) off += idx[d] * t.stride(d);
    out.push_back(base[off]);
    for (int64_t d = t.dim() - 1; d >= 0; --d) {
      if (++idx[d] < t.size(d)) break;
      idx[d] = 0;
    }
  }
  return out;
}

std::vector<double> iota(int64_t n, double start = 0, double step = 1) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = start + step * static_cast<double>(i);
  return v;
}

// ---- creation ---------------------------------------------------------------------------------

TEST_P(TensorTest, EmptyHasGeometryAndOptions) {
  Tensor t = empty({2, 3, 4}, TensorOptions(kFloat16, dev()));
  EXPECT_EQ(t.sizes(), (Shape{2, 3, 4}));
  EXPECT_EQ(t.strides(), (Shape{12, 4, 1}));
  EXPECT_EQ(t.dtype(), kFloat16);
  EXPECT_EQ(t.device(), dev());
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_FALSE(t.requires_grad());
  EXPECT_TRUE(empty({3}, TensorOptions(kFloat32, dev(), true)).requires_grad());
  Tensor z = empty({0, 5}, dev());
  EXPECT_EQ(z.numel(), 0);
  EXPECT_EQ(z.sizes(), (Shape{0, 5}));
  EXPECT_EQ(z.dtype(), kFloat32);
  Tensor s = empty({}, dev());
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
}

TEST_P(TensorTest, ZerosOnesFullEveryDType) {
  for (DType dt : kAllDTypes) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor z = zeros({2, 3}, TensorOptions(dt, dev()));
    Tensor o = ones({2, 3}, TensorOptions(dt, dev()));
    EXPECT_EQ(z.dtype(), dt);
    EXPECT_EQ(o.device(), dev());
    EXPECT_EQ(values(z), std::vector<double>(6, 0.0));
    EXPECT_EQ(values(o), std::vector<double>(6, 1.0));
    const double v = dt == kBool ? 1.0 : dt == kUInt8 ? 200.0 : is_floating(dt) ? -2.5 : -7.0;
    Tensor f = full({4}, v, TensorOptions(dt, dev()));
    EXPECT_EQ(values(f), std::vector<double>(4, v));
  }
  // A float value into an integer tensor truncates; an int into bool is nonzero-ness.
  EXPECT_EQ(values(full({2}, 2.9, TensorOptions(kInt32, dev()))), (std::vector<double>{2, 2}));
  EXPECT_EQ(values(full({2}, -2.9, TensorOptions(kInt64, dev()))), (std::vector<double>{-2, -2}));
  EXPECT_EQ(values(full({1}, 5, TensorOptions(kBool, dev()))), (std::vector<double>{1}));
  EXPECT_EQ(values(full({}, 3.25, dev())), (std::vector<double>{3.25}));
  EXPECT_TRUE(full({2}, 1.0, TensorOptions(kFloat64, dev(), true)).requires_grad());
}

TEST_P(TensorTest, LikeOpsFollowTheirTensor) {
  Tensor base = ones({3, 4}, TensorOptions(kFloat64, dev())).t();  // non-contiguous
  for (Tensor t : {zeros_like(base), ones_like(base), full_like(base, 7), empty_like(base)}) {
    EXPECT_EQ(t.sizes(), (Shape{4, 3}));
    EXPECT_EQ(t.dtype(), kFloat64);
    EXPECT_EQ(t.device(), dev());
    EXPECT_TRUE(t.is_contiguous());
    EXPECT_FALSE(t.shares_storage(base));
  }
  EXPECT_EQ(values(zeros_like(base)), std::vector<double>(12, 0.0));
  EXPECT_EQ(values(ones_like(base)), std::vector<double>(12, 1.0));
  EXPECT_EQ(values(full_like(base, 7)), std::vector<double>(12, 7.0));
  Tensor i = full_like(base, 3.7, TensorOptions(kInt32, dev()));
  EXPECT_EQ(i.dtype(), kInt32);
  EXPECT_EQ(values(i), std::vector<double>(12, 3.0));
  EXPECT_TRUE(zeros_like(base, TensorOptions(kFloat32, dev(), true)).requires_grad());
  // requires_grad of the model is not inherited.
  Tensor leaf = ones({2}, TensorOptions(kFloat64, dev(), true));
  EXPECT_FALSE(zeros_like(leaf).requires_grad());
}

TEST_P(TensorTest, ArangeIntegers) {
  Tensor a = arange(5, TensorOptions(kInt64, dev()));
  EXPECT_EQ(a.dtype(), kInt64);
  EXPECT_EQ(a.sizes(), (Shape{5}));
  EXPECT_EQ(values(a), iota(5));
  EXPECT_EQ(arange(5).dtype(), kInt64);  // every bound an integer: int64
  EXPECT_EQ(values(arange(1, 10, 3, TensorOptions(kInt64, dev()))), (std::vector<double>{1, 4, 7}));
  EXPECT_EQ(values(arange(1, 11, 3, TensorOptions(kInt64, dev()))), (std::vector<double>{1, 4, 7, 10}));
  EXPECT_EQ(values(arange(10, 0, -3, TensorOptions(kInt64, dev()))), (std::vector<double>{10, 7, 4, 1}));
  EXPECT_EQ(values(arange(0, -5, -1, TensorOptions(kInt64, dev()))), (std::vector<double>{0, -1, -2, -3, -4}));
  EXPECT_EQ(values(arange(-3, 3, 2, TensorOptions(kInt64, dev()))), (std::vector<double>{-3, -1, 1}));
  EXPECT_EQ(arange(4, 4).numel(), 0);
  // Large int64 values stay exact (no trip through double).
  const int64_t big = (int64_t{1} << 60) + 1;
  EXPECT_EQ(arange(big, big + 3).tolist<int64_t>(), (std::vector<int64_t>{big, big + 1, big + 2}));
  // An explicit dtype converts.
  Tensor f = arange(0, 4, 1, TensorOptions(kFloat16, dev()));
  EXPECT_EQ(f.dtype(), kFloat16);
  EXPECT_EQ(values(f), iota(4));
}

TEST_P(TensorTest, ArangeFloats) {
  Tensor a = arange(0.0, 1.0, 0.25, TensorOptions(kFloat32, dev()));
  EXPECT_EQ(a.dtype(), kFloat32);
  EXPECT_EQ(values(a), (std::vector<double>{0, 0.25, 0.5, 0.75}));
  EXPECT_EQ(arange(0, 1.0).dtype(), kFloat32);   // one float bound: the default float type
  EXPECT_EQ(arange(0, 2, 0.5).dtype(), kFloat32);
  EXPECT_EQ(arange(0.0, 1.0, 0.1).numel(), 10);  // ceil((1 - 0) / 0.1)
  EXPECT_EQ(arange(1.0, 2.5, 0.5).numel(), 3);
  EXPECT_EQ(arange(1.0, 2.6, 0.5).numel(), 4);
  Tensor d = arange(2.0, -1.0, -0.75, TensorOptions(kFloat64, dev()));
  EXPECT_EQ(values(d), (std::vector<double>{2.0, 1.25, 0.5, -0.25}));
  EXPECT_TRUE(arange(0.0, 3.0, 1.0, TensorOptions(kFloat64, dev(), true)).requires_grad());
}

TEST_P(TensorTest, ArangeErrors) {
  EXPECT_TRUE(throws<ValueError>([&] { arange(0, 10, 0); }, "step must be nonzero"));
  EXPECT_TRUE(throws<ValueError>([&] { arange(0.0, 1.0, 0.0); }, "step must be nonzero"));
  EXPECT_TRUE(throws<ValueError>([&] { arange(0, 10, -1); }, "never ends"));
  EXPECT_TRUE(throws<ValueError>([&] { arange(10, 0, 2); }, "never ends"));
  EXPECT_TRUE(throws<ValueError>([&] { arange(-5); }, "never ends"));
  EXPECT_TRUE(throws<ValueError>([&] { arange(0.0, INFINITY); }, "finite"));
  EXPECT_TRUE(throws<ValueError>([&] { arange(NAN, 1.0); }, "finite"));
}

TEST_P(TensorTest, Linspace) {
  Tensor a = linspace(0, 1, 5, TensorOptions(kFloat64, dev()));
  EXPECT_EQ(values(a), (std::vector<double>{0, 0.25, 0.5, 0.75, 1}));
  EXPECT_EQ(linspace(0, 1, 5).dtype(), kFloat32);
  Tensor b = linspace(-1, 2, 7, TensorOptions(kFloat64, dev()));
  const auto bv = values(b);
  ASSERT_EQ(bv.size(), 7u);
  for (int i = 0; i < 7; ++i) EXPECT_NEAR(bv[i], -1 + 0.5 * i, 1e-15);
  EXPECT_EQ(bv.front(), -1.0);  // both ends exact
  EXPECT_EQ(bv.back(), 2.0);
  // Decreasing, and ends exact for steps that do not divide evenly.
  const auto c = values(linspace(1, 0.1, 11, TensorOptions(kFloat64, dev())));
  EXPECT_EQ(c.front(), 1.0);
  EXPECT_EQ(c.back(), 0.1);
  EXPECT_NEAR(c[5], 0.55, 1e-15);
  EXPECT_EQ(values(linspace(3, 9, 1, TensorOptions(kFloat64, dev()))), (std::vector<double>{3}));
  EXPECT_EQ(linspace(3, 9, 0, TensorOptions(kFloat64, dev())).numel(), 0);
  EXPECT_EQ(values(linspace(0, 10, 5, TensorOptions(kInt64, dev()))), (std::vector<double>{0, 2, 5, 7, 10}));
  EXPECT_TRUE(throws<ValueError>([&] { linspace(0, 1, -1); }, "steps must be nonnegative"));
}

TEST_P(TensorTest, Eye) {
  for (auto [n, m] : std::vector<std::pair<int64_t, int64_t>>{{3, -1}, {2, 3}, {3, 2}, {1, 1}, {0, -1}, {2, 0}}) {
    Tensor e = eye(n, m, TensorOptions(kFloat64, dev()));
    const int64_t mm = m < 0 ? n : m;
    ASSERT_EQ(e.sizes(), (Shape{n, mm}));
    std::vector<double> want(n * mm);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < mm; ++j) want[i * mm + j] = i == j ? 1.0 : 0.0;
    EXPECT_EQ(values(e), want) << n << "x" << mm;
  }
  EXPECT_EQ(eye(2, -1, TensorOptions(kBool, dev())).dtype(), kBool);
  EXPECT_EQ(values(eye(2, -1, TensorOptions(kInt32, dev()))), (std::vector<double>{1, 0, 0, 1}));
  EXPECT_TRUE(eye(2, -1, TensorOptions(kFloat64, dev(), true)).requires_grad());
  EXPECT_TRUE(throws<ValueError>([&] { eye(-2); }, "[eye] n must be nonnegative"));
}

TEST_P(TensorTest, FromBufferCopies) {
  std::vector<int32_t> src = {1, -2, 3, 4, 5, 6};
  Tensor t = from_buffer(src.data(), {2, 3}, kInt32, dev());
  EXPECT_EQ(t.dtype(), kInt32);
  EXPECT_EQ(t.device(), dev());
  EXPECT_EQ(t.sizes(), (Shape{2, 3}));
  src[0] = 100;  // the tensor holds a copy
  EXPECT_EQ(values(t), (std::vector<double>{1, -2, 3, 4, 5, 6}));
  std::vector<Half> h = {Half(1.5f), Half(-0.25f)};
  EXPECT_EQ(values(from_buffer(h.data(), {2}, kFloat16, dev())), (std::vector<double>{1.5, -0.25}));
  EXPECT_EQ(from_buffer(nullptr, {0, 3}, kFloat32, dev()).numel(), 0);
  EXPECT_TRUE(throws<ValueError>([&] { from_buffer(nullptr, {2}, kFloat32); }, "null data pointer"));
  EXPECT_TRUE(throws<ValueError>([&] { from_buffer(src.data(), {-1}, kInt32); }, "negative size"));
}

TEST(TensorFromBlob, WrapsWithoutCopyAndRunsDeleterOnce) {
  int deleted = 0;
  void* seen = nullptr;
  std::vector<float> buf = {1, 2, 3, 4, 5, 6};
  {
    Tensor t = from_blob(buf.data(), {2, 3}, {}, kFloat32, Device(kCPU), [&](void* p) {
      ++deleted;
      seen = p;
    });
    EXPECT_EQ(t.data_ptr(), buf.data());
    EXPECT_EQ(t.strides(), (Shape{3, 1}));
    buf[4] = 50;  // no copy: the tensor sees writes to the memory
    EXPECT_EQ(values(t), (std::vector<double>{1, 2, 3, 4, 50, 6}));
    t.select(0, 0).fill_(-1);  // and writes through it land in the memory
    EXPECT_EQ(buf[0], -1);
    EXPECT_EQ(buf[3], 4);
    Tensor view = t.t();
    t = Tensor();
    EXPECT_EQ(deleted, 0);  // a view keeps the memory alive
    EXPECT_EQ(values(view)[1], 4);
  }
  EXPECT_EQ(deleted, 1);
  EXPECT_EQ(seen, buf.data());
  // Explicit strides: a column-major 2 x 3 view of 6 values.
  Tensor cm = from_blob(buf.data(), {2, 3}, {1, 2}, kFloat32, Device(kCPU));
  EXPECT_FALSE(cm.is_contiguous());
  EXPECT_EQ(values(cm), (std::vector<double>{-1, -1, 50, -1, 4, 6}));
  EXPECT_TRUE(throws<ShapeError>([&] { from_blob(buf.data(), {2, 3}, {1}, kFloat32, Device(kCPU)); }, "2 sizes but 1 strides"));
  EXPECT_TRUE(throws<ValueError>([&] { from_blob(buf.data(), {2, 3}, {-3, 1}, kFloat32, Device(kCPU)); }, "negative strides"));
}

TEST_P(TensorTest, TensorFromValues) {
  Tensor a = tensor({1.5, -2.0, 3.25}, dev());
  EXPECT_EQ(a.dtype(), kFloat32);
  EXPECT_EQ(a.device(), dev());
  EXPECT_EQ(values(a), (std::vector<double>{1.5, -2.0, 3.25}));
  Tensor b = tensor(std::vector<int32_t>{4, 5}, TensorOptions(kInt32, dev()));
  EXPECT_EQ(b.dtype(), kInt32);
  EXPECT_EQ(values(b), (std::vector<double>{4, 5}));
  EXPECT_EQ(tensor(std::vector<int64_t>{7}).dtype(), kInt64);
  EXPECT_EQ(tensor(std::vector<double>{7}).dtype(), kFloat64);
  Tensor c = tensor(std::vector<int64_t>{1, 2}, TensorOptions(kFloat64, dev(), true));
  EXPECT_EQ(c.dtype(), kFloat64);
  EXPECT_TRUE(c.requires_grad());
  EXPECT_TRUE(c.is_leaf());
  Tensor s = scalar_tensor(2.5, TensorOptions(kFloat64, dev()));
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item<double>(), 2.5);
}

TEST_P(TensorTest, TensorFromBools) {
  Tensor b = tensor(std::vector<bool>{true, false, true}, dev());
  EXPECT_EQ(b.dtype(), kBool);
  EXPECT_EQ(b.device(), dev());
  EXPECT_EQ(b.tolist<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(tensor(std::vector<bool>{}).numel(), 0);
  Tensor f = tensor(std::vector<bool>{false, true}, TensorOptions(kFloat32, dev()));
  EXPECT_EQ(f.dtype(), kFloat32);
  EXPECT_EQ(values(f), (std::vector<double>{0, 1}));
  // A braced list of bools is a bool tensor; one of numbers stays float32.
  Tensor l = tensor({true, true, false}, dev());
  EXPECT_EQ(l.dtype(), kBool);
  EXPECT_EQ(values(l), (std::vector<double>{1, 1, 0}));
  EXPECT_EQ(tensor({1, 2}).dtype(), kFloat32);
  EXPECT_EQ(tensor({1.0, 0.0}).dtype(), kFloat32);
}

TEST_P(TensorTest, UnsetOptionsTakeTheOpDefaults) {
  EXPECT_FALSE(TensorOptions(dev()).dtype.has_value());
  EXPECT_FALSE(TensorOptions(kInt32).device.has_value());
  EXPECT_EQ(*TensorOptions(dev()).resolved(kInt8).dtype, kInt8);
  EXPECT_EQ(*TensorOptions(kInt32).resolved().device, Device(kCPU));
  // *_like keep what the options leave unset.
  const Tensor ints = full({2, 3}, 4, TensorOptions(kInt32, dev()));
  for (Tensor t : {zeros_like(ints, dev()), ones_like(ints, dev()), empty_like(ints, dev()), full_like(ints, 2.5, dev())}) {
    EXPECT_EQ(t.dtype(), kInt32);
    EXPECT_EQ(t.device(), dev());
    EXPECT_EQ(t.sizes(), (Shape{2, 3}));
  }
  EXPECT_EQ(values(full_like(ints, 2.5, dev())), std::vector<double>(6, 2.0));
  const Tensor f64 = ones({3}, TensorOptions(kFloat64, dev()));
  EXPECT_EQ(zeros_like(f64, kFloat16).device(), dev());
  EXPECT_EQ(zeros_like(f64, kFloat16).dtype(), kFloat16);
  EXPECT_EQ(rand_like(f64, dev()).dtype(), kFloat64);
  EXPECT_EQ(randn_like(f64, TensorOptions(kFloat32)).device(), dev());
  EXPECT_TRUE(zeros_like(f64, TensorOptions(kFloat64, dev(), true)).requires_grad());
  // arange infers int64 from integer bounds, the default float from a floating one.
  Tensor a = arange(5, dev());
  EXPECT_EQ(a.dtype(), kInt64);
  EXPECT_EQ(a.device(), dev());
  EXPECT_EQ(values(a), iota(5));
  EXPECT_EQ(arange(1, 7, 2, dev()).dtype(), kInt64);
  EXPECT_EQ(arange(0, 2.5, 1, dev()).dtype(), kFloat32);
  EXPECT_EQ(arange(5, kFloat64).dtype(), kFloat64);
  EXPECT_EQ(arange(5, kFloat64).device(), Device(kCPU));
  // full infers from the value like torch.full: bool, int64, the default float.
  EXPECT_EQ(full({2}, true, dev()).dtype(), kBool);
  EXPECT_EQ(full({2}, 7, dev()).dtype(), kInt64);
  EXPECT_EQ(full({1}, int64_t{1} << 40, dev()).item<int64_t>(), int64_t{1} << 40);
  EXPECT_EQ(full({2}, 2.5, dev()).dtype(), kFloat32);
  EXPECT_EQ(full({2}, 7, TensorOptions(kFloat64)).dtype(), kFloat64);
  // tensor keeps its element type when only a device is given.
  Tensor t = tensor(std::vector<int64_t>{3, 4}, dev());
  EXPECT_EQ(t.dtype(), kInt64);
  EXPECT_EQ(t.device(), dev());
  EXPECT_EQ(tensor(std::vector<int32_t>{3}, kFloat64).dtype(), kFloat64);
  // Everything else: float32 (and the CPU when no device is given).
  for (Tensor z : {zeros({2}, dev()), ones({2}, dev()), empty({2}, dev()), eye(2, -1, dev()), linspace(0, 1, 3, dev()),
                   rand({2}, dev()), randn({2}, dev()), scalar_tensor(2, dev()), tensor({1.0, 2.0}, dev())}) {
    EXPECT_EQ(z.dtype(), kFloat32);
    EXPECT_EQ(z.device(), dev());
  }
  EXPECT_EQ(zeros({2}, kInt32).device(), Device(kCPU));
  EXPECT_EQ(randint(0, 5, {3}, dev()).dtype(), kInt64);
  EXPECT_EQ(randint(0, 5, {3}, dev()).device(), dev());
  EXPECT_EQ(randperm(4, dev()).dtype(), kInt64);
}

// ---- metadata ---------------------------------------------------------------------------------

TEST_P(TensorTest, Metadata) {
  Tensor t = zeros({2, 3, 4}, TensorOptions(kInt32, dev()));
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.dim(), 3);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.size(0), 2);
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_EQ(t.stride(0), 12);
  EXPECT_EQ(t.stride(-2), 4);
  EXPECT_EQ(t.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(t.element_size(), 4u);
  EXPECT_EQ(t.nbytes(), 96u);
  EXPECT_EQ(t.storage_offset(), 0);
  EXPECT_EQ(*t.options().dtype, kInt32);
  EXPECT_EQ(*t.options().device, dev());
  EXPECT_FALSE(t.is_floating_point());
  EXPECT_EQ(t.is_cuda(), dev().is_cuda());
  EXPECT_EQ(t.is_cpu(), dev().is_cpu());
  Tensor v = t.select(1, 2);
  EXPECT_EQ(v.storage_offset(), 8);
  EXPECT_EQ(v.sizes(), (Shape{2, 4}));
  EXPECT_EQ(v.strides(), (Shape{12, 1}));
  EXPECT_FALSE(v.is_contiguous());
  EXPECT_EQ(static_cast<char*>(v.data_ptr()) - static_cast<char*>(t.data_ptr()), 32);
  EXPECT_TRUE(t.transpose(0, 2).transpose(0, 2).is_contiguous());
  EXPECT_TRUE(zeros({1, 3}).t().is_contiguous());  // size-1 dims do not count
  Tensor copy = t;
  EXPECT_TRUE(copy.is_same(t));
  EXPECT_FALSE(t.is_same(v));
  EXPECT_TRUE(t.shares_storage(v));
  EXPECT_FALSE(t.shares_storage(t.clone()));
  EXPECT_TRUE(throws<IndexError>([&] { t.size(3); }, "[size] dim 3 out of range"));
  EXPECT_TRUE(throws<IndexError>([&] { t.stride(-4); }, "[stride] dim -4 out of range"));
  Tensor s = zeros({}, dev());
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_TRUE(s.is_contiguous());
}

TEST(TensorData, DataPtrChecksDType) {
  Tensor t = zeros({2}, kFloat32);
  EXPECT_EQ(t.data_ptr<float>(), t.data_ptr());
  EXPECT_TRUE(throws<DTypeError>([&] { t.data_ptr<double>(); }, "has dtype float32 but float64 was requested"));
}

// ---- item -------------------------------------------------------------------------------------

TEST_P(TensorTest, ItemEveryDType) {
  auto one = [&](auto v) {
    const decltype(v) data[1] = {v};
    return from_buffer(data, {}, dtype_of_v<decltype(v)>).to(dev());
  };
  Scalar b = one(true).item();
  EXPECT_TRUE(b.is_bool());
  EXPECT_TRUE(b.to_bool());
  EXPECT_FALSE(one(false).item<bool>());
  Scalar u = one(uint8_t{200}).item();
  EXPECT_TRUE(u.is_integral());
  EXPECT_EQ(u.to_int(), 200);
  EXPECT_EQ(one(int8_t{-128}).item<int64_t>(), -128);
  EXPECT_EQ(one(int32_t{-2000000000}).item<int64_t>(), -2000000000);
  const int64_t big = (int64_t{1} << 62) + 1;  // not representable in double
  Scalar l = one(big).item();
  EXPECT_TRUE(l.is_integral());
  EXPECT_EQ(l.to_int(), big);
  Scalar h = one(Half(1.5f)).item();
  EXPECT_TRUE(h.is_floating());
  EXPECT_EQ(h.to_double(), 1.5);
  EXPECT_EQ(one(BFloat16(-3.0f)).item<double>(), -3.0);
  EXPECT_EQ(one(0.1f).item<double>(), static_cast<double>(0.1f));
  EXPECT_EQ(one(0.1f).item<float>(), 0.1f);
  EXPECT_EQ(one(0.1).item<double>(), 0.1);
  EXPECT_EQ(one(2.75).item<int64_t>(), 2);  // Scalar::to truncates
  // A one-element tensor of any shape, and an element of a non-contiguous view.
  EXPECT_EQ(full({1, 1, 1}, 4.0, dev()).item<double>(), 4.0);
  Tensor m = make({1, 2, 3, 4, 5, 6}, {2, 3}, dev());
  EXPECT_EQ(m.t()[2][1].item<double>(), 6.0);
  EXPECT_TRUE(throws<ValueError>([&] { m.item(); }, "[item] only one-element tensors have an item"));
  EXPECT_TRUE(throws<ValueError>([&] { zeros({0}, dev()).item(); }, "shape [0]"));
}

// ---- dtype conversion -------------------------------------------------------------------------

// Sample values exactly representable in dtype.
std::vector<double> samples(DType dt) {
  switch (dt) {
    case kBool: return {0, 1, 1, 0};
    case kUInt8: return {0, 1, 7, 200, 255, 128};
    case kInt8: return {0, 1, -1, -128, 127, 100};
    case kInt16: return {0, 1, -1, -32768, 32767, 1000};
    case kInt32: return {0, 1, -1, 70000, -70000, 300};
    case kInt64: return {0, 1, -1, 1099511627777.0 /* 2^40 + 1 */, -300, 123456789};
    case kFloat16: return {0, 1, -2.75, 3.5, 1000.5, -0.5};
    case kBFloat16: return {0, 1, -2.75, 3.5, 256, -0.5};
    case kFloat32: return {0, 1, -2.75, 3.5, static_cast<double>(0.1f), 70000.5};
    case kFloat64: return {0, 1, -2.75, 3.5, 0.1, 1e-300};
  }
  return {};
}

// What converting the exact value v (from a tensor of dtype from) to dtype to gives, computed with
// C++ conversions: truncation toward zero from floats, two's complement wrap-around between integers.
// Returns NaN for pairs whose result C++ leaves undefined (a float out of the integer's range).
double converted(double v, DType from, DType to) {
  auto integer = [&](auto lo, auto hi, auto wrap) -> double {
    if (is_floating(from)) {
      const double t = std::trunc(v);
      return t < lo || t > hi ? NAN : t;
    }
    return static_cast<double>(wrap(static_cast<int64_t>(v)));
  };
  switch (to) {
    case kBool: return v != 0 ? 1 : 0;
    case kUInt8: return integer(0, 255, [](int64_t x) { return static_cast<uint8_t>(x); });
    case kInt8: return integer(-128, 127, [](int64_t x) { return static_cast<int8_t>(x); });
    case kInt16: return integer(-32768, 32767, [](int64_t x) { return static_cast<int16_t>(x); });
    case kInt32: return integer(-2147483648.0, 2147483647.0, [](int64_t x) { return static_cast<int32_t>(x); });
    case kInt64: return integer(-9.2e18, 9.2e18, [](int64_t x) { return x; });
    case kFloat16: return static_cast<float>(Half(static_cast<float>(v)));
    case kBFloat16: return static_cast<float>(BFloat16(static_cast<float>(v)));
    case kFloat32: return static_cast<float>(v);
    case kFloat64: return v;
  }
  return NAN;
}

TEST_P(TensorTest, ToEveryDTypePair) {
  for (DType from : kAllDTypes) {
    const auto sv = samples(from);
    Tensor src = make(sv, {static_cast<int64_t>(sv.size())}, dev(), from);
    ASSERT_EQ(values(src), sv) << dtype_name(from);
    for (DType to : kAllDTypes) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + dtype_name(to));
      Tensor r = src.to(to);
      EXPECT_EQ(r.dtype(), to);
      EXPECT_EQ(r.device(), dev());
      EXPECT_EQ(r.is_same(src), from == to);  // no copy unless needed
      const auto got = values(r);
      for (size_t i = 0; i < sv.size(); ++i) {
        const double want = converted(sv[i], from, to);
        if (std::isnan(want)) continue;
        EXPECT_EQ(got[i], want) << "value " << sv[i];
      }
    }
  }
}

TEST_P(TensorTest, ToSpecificValues) {
  // float -> int truncates toward zero.
  Tensor f = make({2.9, -2.9, 0.5, -0.5, 127.99}, {5}, dev(), kFloat32);
  EXPECT_EQ(values(f.to(kInt32)), (std::vector<double>{2, -2, 0, 0, 127}));
  EXPECT_EQ(values(f.to(kInt8)), (std::vector<double>{2, -2, 0, 0, 127}));
  EXPECT_EQ(values(f.to(kBool)), (std::vector<double>{1, 1, 1, 1, 1}));
  // Integers wrap around like C++ conversions.
  Tensor i = make({300, -1, 256, -129}, {4}, dev(), kInt64);
  EXPECT_EQ(values(i.to(kUInt8)), (std::vector<double>{44, 255, 0, 127}));
  EXPECT_EQ(values(i.to(kInt8)), (std::vector<double>{44, -1, 0, 127}));
  // float16 rounds to nearest, ties to even; overflow to inf; tiny values to subnormals or zero.
  Tensor h = make({0.1, 2049, 2051, 65504, 65519, 65520, 1e5, -1e5, 1e-7, 1e-8, 2.9802322387695312e-8}, {11}, dev(),
                  kFloat32);
  const auto hv = values(h.to(kFloat16));
  EXPECT_EQ(hv[0], 0.0999755859375);
  EXPECT_EQ(hv[1], 2048);  // halfway: to the even neighbour
  EXPECT_EQ(hv[2], 2052);
  EXPECT_EQ(hv[3], 65504);
  EXPECT_EQ(hv[4], 65504);
  EXPECT_EQ(hv[5], INFINITY);
  EXPECT_EQ(hv[6], INFINITY);
  EXPECT_EQ(hv[7], -INFINITY);
  EXPECT_EQ(hv[8], 2 * 5.9604644775390625e-08);  // 1e-7 is nearest to 2 * 2^-24
  EXPECT_EQ(hv[9], 0);                          // below half the smallest subnormal
  EXPECT_EQ(hv[10], 0);                         // exactly half of 2^-24: ties to even (0)
  // bfloat16 keeps 8 significant bits.
  Tensor b = make({0.1, 257, 259, 3.39e38, -1.0 / 3}, {5}, dev(), kFloat32);
  const auto bv = values(b.to(kBFloat16));
  EXPECT_EQ(bv[0], 0.10009765625);
  EXPECT_EQ(bv[1], 256);
  EXPECT_EQ(bv[2], 260);
  EXPECT_EQ(bv[3], 3.3895313892515355e+38);
  EXPECT_EQ(bv[4], -0.333984375);
  // Large int64 -> float64 rounds to nearest even (2^53 + 1 -> 2^53).
  const int64_t p53 = int64_t{1} << 53;
  Tensor l = host_tensor(std::vector<int64_t>{p53 + 1, p53 + 3}, {2}).to(dev());
  EXPECT_EQ(values(l.to(kFloat64)), (std::vector<double>{9007199254740992.0, 9007199254740996.0}));
  // NaN and inf survive float conversions.
  Tensor n = make({NAN, INFINITY, -INFINITY}, {3}, dev(), kFloat64);
  for (DType dt : {kFloat16, kBFloat16, kFloat32}) {
    const auto nv = values(n.to(dt));
    EXPECT_TRUE(std::isnan(nv[0]));
    EXPECT_EQ(nv[1], INFINITY);
    EXPECT_EQ(nv[2], -INFINITY);
  }
}

TEST_P(TensorTest, ToKeepsLayoutSemantics) {
  Tensor x = make(iota(6), {2, 3}, dev()).t();
  Tensor y = x.to(kFloat32);
  EXPECT_EQ(y.sizes(), (Shape{3, 2}));
  EXPECT_EQ(values(y), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  EXPECT_TRUE(x.to(kFloat64).is_same(x));
  Tensor c = x.to(kFloat64, /*non_blocking=*/false, /*copy=*/true);
  EXPECT_FALSE(c.shares_storage(x));
  EXPECT_EQ(values(c), values(x));
  EXPECT_TRUE(x.to(dev()).is_same(x));
  EXPECT_FALSE(x.to(dev(), /*non_blocking=*/false, /*copy=*/true).shares_storage(x));
}

TEST_P(TensorTest, ToIsDifferentiableBetweenFloats) {
  Tensor x = make({1.5, -2.0}, {2}, dev(), kFloat32).requires_grad_();
  Tensor y = x.to(kFloat64);
  EXPECT_TRUE(y.requires_grad());
  y.backward(make({2.0, 3.0}, {2}, dev()));
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().dtype(), kFloat32);
  EXPECT_EQ(values(x.grad()), (std::vector<double>{2.0, 3.0}));
  // To an integer type: no gradient path.
  EXPECT_FALSE(x.to(kInt32).requires_grad());
}

// ---- copy_, fill_, zero_ ----------------------------------------------------------------------

TEST_P(TensorTest, CopyBetweenLayoutsAndDTypes) {
  const auto src_vals = iota(6, 1);
  Tensor src = make(src_vals, {3, 2}, dev()).t();  // [2, 3] transposed, float64
  for (DType dt : kAllDTypes) {
    if (dt == kBool) continue;
    SCOPED_TRACE(dtype_name(dt));
    Tensor dst = zeros({2, 3}, TensorOptions(dt, dev()));
    dst.copy_(src);
    EXPECT_EQ(dst.dtype(), dt);
    EXPECT_EQ(values(dst), (std::vector<double>{1, 3, 5, 2, 4, 6}));
  }
  // Into a non-contiguous destination: the base sees the values where the view maps them.
  Tensor base = zeros({3, 2}, TensorOptions(kInt32, dev()));
  Tensor dst = base.t();
  dst.copy_(make({1, 2, 3, 4, 5, 6}, {2, 3}, dev(), kFloat32));
  EXPECT_EQ(values(base), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  // Into a strided slice.
  Tensor row = zeros({7}, TensorOptions(kFloat64, dev()));
  row.slice(0, 1, std::nullopt, 2).copy_(make({9, 8, 7}, {3}, dev()));
  EXPECT_EQ(values(row), (std::vector<double>{0, 9, 0, 8, 0, 7, 0}));
  // Float to int truncates; to bool is nonzero-ness.
  Tensor ints = zeros({3}, TensorOptions(kInt64, dev()));
  ints.copy_(make({1.9, -1.9, 0.2}, {3}, dev()));
  EXPECT_EQ(values(ints), (std::vector<double>{1, -1, 0}));
  Tensor bools = zeros({3}, TensorOptions(kBool, dev()));
  bools.copy_(make({0.0, -0.5, 3.0}, {3}, dev()));
  EXPECT_EQ(values(bools), (std::vector<double>{0, 1, 1}));
}

TEST_P(TensorTest, CopyBroadcasts) {
  Tensor dst = zeros({2, 3}, TensorOptions(kFloat32, dev()));
  dst.copy_(make({1, 2, 3}, {3}, dev()));
  EXPECT_EQ(values(dst), (std::vector<double>{1, 2, 3, 1, 2, 3}));
  dst.copy_(make({7, 8}, {2, 1}, dev()));
  EXPECT_EQ(values(dst), (std::vector<double>{7, 7, 7, 8, 8, 8}));
  dst.copy_(full({}, 4.0, TensorOptions(kInt64, dev())));
  EXPECT_EQ(values(dst), std::vector<double>(6, 4));
  dst.copy_(make({5, 6, 7}, {1, 3}, dev()));
  EXPECT_EQ(values(dst), (std::vector<double>{5, 6, 7, 5, 6, 7}));
  Tensor empty_dst = zeros({0, 3}, dev());
  empty_dst.copy_(make({1, 2, 3}, {3}, dev()));
  EXPECT_EQ(empty_dst.numel(), 0);
  EXPECT_TRUE(throws<ShapeError>([&] { dst.copy_(make({1, 2}, {2}, dev())); }, "[copy_]"));
  EXPECT_TRUE(throws<ShapeError>([&] { dst.copy_(zeros({4, 2, 3}, dev())); }, "[copy_]"));
  Tensor expanded = zeros({3}, dev()).expand({2, 3});
  EXPECT_TRUE(throws<Error>([&] { expanded.copy_(zeros({2, 3}, dev())); }, "expanded tensor"));
}

// Copies and in-place ops whose source overlaps the destination in another layout read the source
// before writing: the result is as if the source had been copied out first.
TEST_P(TensorTest, CopyAndInPlaceOpsBetweenOverlappingViews) {
  using View = std::function<Tensor(const Tensor&)>;
  using Write = std::function<void(Tensor, const Tensor&)>;
  const Write copy = [](Tensor d, const Tensor& s) { d.copy_(s); };
  const Write add = [](Tensor d, const Tensor& s) { d.add_(s); };
  const Write mul = [](Tensor d, const Tensor& s) { d.mul_(s); };
  struct Case {
    const char* name;
    View dst, src;
    Write write;
  };
  const View whole = [](const Tensor& x) { return x; };
  const View transposed = [](const Tensor& x) { return x.t(); };
  const std::vector<Case> cases = {
      {"x.copy_(x.t())", whole, transposed, copy},
      {"x.t().copy_(x)", transposed, whole, copy},
      {"x[1:].copy_(x[:-1])", [](const Tensor& x) { return x.narrow(0, 1, 3); },
       [](const Tensor& x) { return x.narrow(0, 0, 3); }, copy},
      {"x[:-1].copy_(x[1:])", [](const Tensor& x) { return x.narrow(0, 0, 3); },
       [](const Tensor& x) { return x.narrow(0, 1, 3); }, copy},
      {"flat[1:].copy_(flat[:-1])", [](const Tensor& x) { return x.view({-1}).narrow(0, 1, 15); },
       [](const Tensor& x) { return x.view({-1}).narrow(0, 0, 15); }, copy},
      {"x.copy_(x[2]) (broadcast)", whole, [](const Tensor& x) { return x.select(0, 2); }, copy},
      {"x.copy_(x)", whole, whole, copy},
      {"x.add_(x.t())", whole, transposed, add},
      {"x[1:].add_(x[:-1])", [](const Tensor& x) { return x.narrow(0, 1, 3); },
       [](const Tensor& x) { return x.narrow(0, 0, 3); }, add},
      {"x.mul_(x[0])", whole, [](const Tensor& x) { return x.select(0, 0); }, mul},
      {"x.mul_(x)", whole, whole, mul},
  };
  for (const auto& c : cases) {
    Tensor x = make(iota(16, 1), {4, 4}, dev());
    Tensor want = x.clone();
    c.write(c.dst(want), c.src(x).clone());  // from a separate copy: no overlap
    c.write(c.dst(x), c.src(x));
    EXPECT_EQ(values(x), values(want)) << c.name;
  }
  Tensor y = make(iota(9), {3, 3}, dev(), kFloat32);
  y.copy_(y.t());
  EXPECT_EQ(values(y), (std::vector<double>{0, 3, 6, 1, 4, 7, 2, 5, 8}));
}

TEST_P(TensorTest, CopyRecordsGradient) {
  Tensor src = make({1, 2, 3}, {3}, dev()).requires_grad_();
  Tensor dst = zeros({2, 3}, TensorOptions(kFloat32, dev()));
  dst.copy_(src);
  EXPECT_TRUE(dst.requires_grad());
  EXPECT_FALSE(dst.is_leaf());
  (dst * make({1, 2, 3, 4, 5, 6}, {2, 3}, dev(), kFloat32)).backward(ones({2, 3}, TensorOptions(kFloat32, dev())));
  ASSERT_TRUE(src.grad().defined());
  EXPECT_EQ(values(src.grad()), (std::vector<double>{5, 7, 9}));  // summed over the broadcast rows
  Tensor leaf = zeros({3}, TensorOptions(kFloat64, dev(), true));
  EXPECT_TRUE(throws<Error>([&] { leaf.copy_(src); }, "leaf tensor that requires grad"));
}

TEST_P(TensorTest, FillAndZeroOnNonContiguousViews) {
  Tensor base = make(iota(20), {4, 5}, dev());
  Tensor col = base.t().select(0, 2);  // column 2, stride 5
  col.fill_(-1);
  Tensor every_other = base.slice(1, 0, std::nullopt, 2).select(0, 3);  // row 3, columns 0, 2, 4
  every_other.zero_();
  std::vector<double> want = iota(20);
  for (int r = 0; r < 4; ++r) want[r * 5 + 2] = -1;
  for (int c : {0, 2, 4}) want[15 + c] = 0;
  EXPECT_EQ(values(base), want);
  // A transposed block of an int tensor.
  Tensor ints = zeros({3, 4}, TensorOptions(kInt32, dev()));
  ints.narrow(1, 1, 2).t().fill_(7.9);
  EXPECT_EQ(values(ints), (std::vector<double>{0, 7, 7, 0, 0, 7, 7, 0, 0, 7, 7, 0}));
  // Every dtype, a 0-d view, and an empty view.
  for (DType dt : kAllDTypes) {
    Tensor t = ones({2, 2}, TensorOptions(dt, dev()));
    t.select(0, 1).select(0, 0).fill_(0);
    EXPECT_EQ(values(t), (std::vector<double>{1, 1, 0, 1})) << dtype_name(dt);
  }
  Tensor e = zeros({2, 0}, dev());
  e.fill_(3);
  EXPECT_EQ(e.numel(), 0);
}

// ---- clone, contiguous ------------------------------------------------------------------------

TEST_P(TensorTest, CloneAndContiguous) {
  Tensor base = make(iota(24), {2, 3, 4}, dev());
  Tensor v = base.permute({2, 0, 1}).slice(0, 1, 3);  // [2, 2, 3], non-contiguous, offset
  ASSERT_FALSE(v.is_contiguous());
  std::vector<double> want;
  for (int k = 1; k < 3; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) want.push_back(i * 12 + j * 4 + k);
  EXPECT_EQ(values(v), want);
  for (Tensor c : {v.clone(), v.contiguous(), rtx::clone(v), rtx::contiguous(v)}) {
    EXPECT_TRUE(c.is_contiguous());
    EXPECT_EQ(c.sizes(), (Shape{2, 2, 3}));
    EXPECT_EQ(c.strides(), (Shape{6, 3, 1}));
    EXPECT_EQ(c.storage_offset(), 0);
    EXPECT_FALSE(c.shares_storage(base));
    EXPECT_EQ(values(c), want);
    if (c.is_cpu()) {
      EXPECT_EQ(strided(c), want);
    }
  }
  // contiguous() of a contiguous tensor is the tensor itself; clone() always copies.
  EXPECT_TRUE(base.contiguous().is_same(base));
  Tensor c = base.clone();
  EXPECT_FALSE(c.shares_storage(base));
  c.fill_(0);
  EXPECT_EQ(values(base), iota(24));
  // 0-d and empty.
  Tensor s = full({}, 2.0, dev());
  EXPECT_EQ(s.clone().dim(), 0);
  EXPECT_EQ(s.clone().item<double>(), 2.0);
  EXPECT_EQ(zeros({0, 4}, dev()).t().contiguous().sizes(), (Shape{4, 0}));
  // Gradients flow through clone.
  Tensor x = make({1, 2}, {2}, dev()).requires_grad_();
  Tensor y = x.clone();
  EXPECT_EQ(y.grad_fn()->name(), "clone");
  y.backward(make({3, 4}, {2}, dev()));
  EXPECT_EQ(values(x.grad()), (std::vector<double>{3, 4}));
}

// ---- version counter --------------------------------------------------------------------------

TEST_P(TensorTest, VersionCounterSharedByViews) {
  Tensor base = zeros({3, 4}, TensorOptions(kFloat32, dev()));
  Tensor view = base.select(0, 1);
  Tensor other_view = base.t();
  const uint64_t v0 = base.version();
  EXPECT_EQ(view.version(), v0);
  view.add_(1);
  EXPECT_GT(base.version(), v0);
  EXPECT_EQ(view.version(), base.version());
  EXPECT_EQ(other_view.version(), base.version());
  const uint64_t v1 = base.version();
  other_view.fill_(2);
  EXPECT_GT(view.version(), v1);
  const uint64_t v2 = base.version();
  view.copy_(zeros({4}, dev()));
  EXPECT_GT(base.version(), v2);
  const uint64_t v3 = base.version();
  base.slice(1, 0, 2).zero_();
  EXPECT_GT(other_view.version(), v3);
  const uint64_t v4 = base.version();
  Tensor out = view + 1;  // out-of-place ops and new views do not bump
  Tensor again = base.view({12});
  EXPECT_EQ(base.version(), v4);
  EXPECT_EQ(out.version(), 0u);  // a fresh storage has its own counter
  EXPECT_EQ(base.clone().version(), 0u);
  EXPECT_EQ(again.version(), v4);
}

// ---- printing ---------------------------------------------------------------------------------

// The suffix a tensor on dev() gets.
std::string device_suffix(Device d) { return d.is_cpu() ? "" : ", device='" + d.str() + "'"; }

TEST_P(TensorTest, PrintFloats) {
  const std::string ds = device_suffix(dev());
  EXPECT_EQ(make({1, 2, 3, 4}, {2, 2}, dev(), kFloat32).str(), "tensor([[1., 2.],\n        [3., 4.]]" + ds + ")");
  EXPECT_EQ(make({1.5, 2.25}, {2}, dev(), kFloat32).str(), "tensor([1.5000, 2.2500]" + ds + ")");
  EXPECT_EQ(make({-1.5, 2}, {2}, dev(), kFloat32).str(), "tensor([-1.5000,  2.0000]" + ds + ")");
  EXPECT_EQ(make({0.1, 10}, {2}, dev(), kFloat32).str(), "tensor([ 0.1000, 10.0000]" + ds + ")");
  EXPECT_EQ(make({-1, 10, 100}, {3}, dev(), kFloat32).str(), "tensor([ -1.,  10., 100.]" + ds + ")");
  EXPECT_EQ(make({0, 0}, {2}, dev(), kFloat32).str(), "tensor([0., 0.]" + ds + ")");
  EXPECT_EQ(make({-0.0, 1}, {2}, dev(), kFloat32).str(), "tensor([-0., 1.]" + ds + ")");
  EXPECT_EQ(make({1e5}, {1}, dev(), kFloat32).str(), "tensor([100000.]" + ds + ")");
  EXPECT_EQ(make({0.12345}, {1}, dev(), kFloat64).str(), "tensor([0.1235]" + ds + ", dtype=float64)");
  // Scientific: ratio above 1000, values above 1e8, or (non-integer) values below 1e-4.
  EXPECT_EQ(make({1e10, 1}, {2}, dev(), kFloat32).str(), "tensor([1.0000e+10, 1.0000e+00]" + ds + ")");
  EXPECT_EQ(make({-1e10, 1}, {2}, dev(), kFloat32).str(), "tensor([-1.0000e+10,  1.0000e+00]" + ds + ")");
  EXPECT_EQ(make({1e9}, {1}, dev(), kFloat32).str(), "tensor([1.0000e+09]" + ds + ")");
  EXPECT_EQ(make({1e-5, 1}, {2}, dev(), kFloat64).str(),
            "tensor([1.0000e-05, 1.0000e+00]" + ds + ", dtype=float64)");
  EXPECT_EQ(make({0.01, 1.5}, {2}, dev(), kFloat32).str(), "tensor([0.0100, 1.5000]" + ds + ")");
  EXPECT_EQ(make({0.001, 2}, {2}, dev(), kFloat32).str(), "tensor([1.0000e-03, 2.0000e+00]" + ds + ")");
  EXPECT_EQ(make({1, 1001}, {2}, dev(), kFloat32).str(), "tensor([1.0000e+00, 1.0010e+03]" + ds + ")");
  EXPECT_EQ(make({1, 1000}, {2}, dev(), kFloat32).str(), "tensor([   1., 1000.]" + ds + ")");
  // nan and inf take no part in choosing the format.
  EXPECT_EQ(make({NAN, INFINITY, -INFINITY, 1.5}, {4}, dev(), kFloat32).str(),
            "tensor([   nan,    inf,   -inf, 1.5000]" + ds + ")");
  EXPECT_EQ(make({NAN, 1, 2}, {3}, dev(), kFloat32).str(), "tensor([nan, 1., 2.]" + ds + ")");
  EXPECT_EQ(make({-NAN, -INFINITY}, {2}, dev(), kFloat32).str(), "tensor([nan, -inf]" + ds + ")");
  EXPECT_EQ(make({NAN, 1e-5, 1}, {3}, dev(), kFloat32).str(), "tensor([       nan, 1.0000e-05, 1.0000e+00]" + ds + ")");
}

TEST_P(TensorTest, PrintScalarsIntsBoolsAndDTypes) {
  const std::string ds = device_suffix(dev());
  EXPECT_EQ(full({}, 3.5, dev()).str(), "tensor(3.5000" + ds + ")");
  EXPECT_EQ(full({}, 3.0, dev()).str(), "tensor(3." + ds + ")");
  EXPECT_EQ(full({}, -7, TensorOptions(kInt64, dev())).str(), "tensor(-7" + ds + ")");
  EXPECT_EQ(full({}, true, TensorOptions(kBool, dev())).str(), "tensor(True" + ds + ")");
  EXPECT_EQ(full({}, 1e-9, TensorOptions(kFloat64, dev())).str(), "tensor(1.0000e-09" + ds + ", dtype=float64)");
  EXPECT_EQ(make({1, 2, 3}, {3}, dev(), kInt64).str(), "tensor([1, 2, 3]" + ds + ")");
  EXPECT_EQ(make({-1, 10, 100}, {3}, dev(), kInt64).str(), "tensor([ -1,  10, 100]" + ds + ")");
  EXPECT_EQ(make({1, 0}, {2}, dev(), kBool).str(), "tensor([ True, False]" + ds + ")");
  EXPECT_EQ(make({1, 1}, {2}, dev(), kBool).str(), "tensor([True, True]" + ds + ")");
  EXPECT_EQ(make({1, 2}, {2}, dev(), kInt32).str(), "tensor([1, 2]" + ds + ", dtype=int32)");
  EXPECT_EQ(make({255, 0}, {2}, dev(), kUInt8).str(), "tensor([255,   0]" + ds + ", dtype=uint8)");
  EXPECT_EQ(make({-128, 5}, {2}, dev(), kInt8).str(), "tensor([-128,    5]" + ds + ", dtype=int8)");
  EXPECT_EQ(make({1.5, 2}, {2}, dev(), kFloat16).str(), "tensor([1.5000, 2.0000]" + ds + ", dtype=float16)");
  EXPECT_EQ(make({0.1}, {1}, dev(), kBFloat16).str(), "tensor([0.1001]" + ds + ", dtype=bfloat16)");
  const int64_t big = (int64_t{1} << 62) + 1;
  EXPECT_EQ(host_tensor(std::vector<int64_t>{big}, {1}).to(dev()).str(), "tensor([4611686018427387905]" + ds + ")");
  // 3-d: a blank line between the outermost blocks.
  EXPECT_EQ(zeros({2, 2, 2}, dev()).str(),
            "tensor([[[0., 0.],\n         [0., 0.]],\n\n        [[0., 0.],\n         [0., 0.]]]" + ds + ")");
  // A non-contiguous view prints its logical order.
  EXPECT_EQ(make({1, 2, 3, 4, 5, 6}, {2, 3}, dev(), kInt64).t().str(),
            "tensor([[1, 4],\n        [2, 5],\n        [3, 6]]" + ds + ")");
}

TEST_P(TensorTest, PrintEmpty) {
  const std::string ds = device_suffix(dev());
  EXPECT_EQ(zeros({0}, dev()).str(), "tensor([]" + ds + ")");
  EXPECT_EQ(zeros({0, 3}, dev()).str(), "tensor([]" + ds + ", size=(0, 3))");
  EXPECT_EQ(zeros({2, 0, 1}, dev()).str(), "tensor([]" + ds + ", size=(2, 0, 1))");
  // No element shows the dtype, so every type but the default float is named.
  EXPECT_EQ(zeros({0}, TensorOptions(kInt64, dev())).str(), "tensor([]" + ds + ", dtype=int64)");
  EXPECT_EQ(zeros({0, 2}, TensorOptions(kBool, dev())).str(), "tensor([]" + ds + ", size=(0, 2), dtype=bool)");
}

TEST_P(TensorTest, PrintAutogradSuffixes) {
  const std::string ds = device_suffix(dev());
  Tensor x = make({1, 2}, {2}, dev(), kFloat32).requires_grad_();
  EXPECT_EQ(x.str(), "tensor([1., 2.]" + ds + ", requires_grad=True)");
  Tensor y = x * 2;
  EXPECT_EQ(y.str(), "tensor([2., 4.]" + ds + ", grad_fn=<mul>)");
  EXPECT_EQ(y.detach().str(), "tensor([2., 4.]" + ds + ")");
  Tensor h = make({1, 2}, {2}, dev(), kFloat16).requires_grad_();
  EXPECT_EQ(h.exp().str().substr(0, 8), "tensor([");
  EXPECT_NE(h.exp().str().find(ds + ", dtype=float16, grad_fn=<exp>)"), std::string::npos);
  std::ostringstream os;
  os << x;
  EXPECT_EQ(os.str(), x.str());
}

TEST_P(TensorTest, PrintWrapsLinesAndSuffixes) {
  const std::string ds = device_suffix(dev());
  // 73 columns after the indent fit 14 elements of width 3 (+ ", ").
  EXPECT_EQ(arange(0, 30, 1, TensorOptions(kFloat32, dev())).str(),
            "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
            "        14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27.,\n"
            "        28., 29.]" + ds + ")");
  // Rows of a matrix wrap with one more column of indent.
  EXPECT_EQ(arange(0, 40, 1, TensorOptions(kFloat32, dev())).view({2, 20}).str(),
            "tensor([[ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
            "         14., 15., 16., 17., 18., 19.],\n"
            "        [20., 21., 22., 23., 24., 25., 26., 27., 28., 29., 30., 31., 32., 33.,\n"
            "         34., 35., 36., 37., 38., 39.]]" + ds + ")");
  // A suffix that would pass 80 columns goes on its own line.
  const std::string row =
      "tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,\n"
      "        18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35,\n"
      "        36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53]";
  Tensor ints = arange(0, 54, 1, TensorOptions(kInt32, dev()));
  EXPECT_EQ(ints.str(), row + (dev().is_cpu() ? ",\n       dtype=int32)"
                                               : ",\n       device='" + dev().str() + "', dtype=int32)"));
  const std::string fits = arange(0, 40, 1, TensorOptions(kInt32, dev())).str();
  const std::string tail = "\n        36, 37, 38, 39]" + ds + ", dtype=int32)";
  EXPECT_EQ(fits.substr(fits.size() - tail.size()), tail);
}

TEST_P(TensorTest, PrintSummarizesLargeTensors) {
  const std::string ds = device_suffix(dev());
  EXPECT_EQ(arange(0, 2000, 1, TensorOptions(kInt64, dev())).str(),
            "tensor([   0,    1,    2,  ..., 1997, 1998, 1999]" + ds + ")");
  EXPECT_EQ(arange(0, 10000, 1, TensorOptions(kInt64, dev())).view({100, 100}).str(),
            "tensor([[   0,    1,    2,  ...,   97,   98,   99],\n"
            "        [ 100,  101,  102,  ...,  197,  198,  199],\n"
            "        [ 200,  201,  202,  ...,  297,  298,  299],\n"
            "        ...,\n"
            "        [9700, 9701, 9702,  ..., 9797, 9798, 9799],\n"
            "        [9800, 9801, 9802,  ..., 9897, 9898, 9899],\n"
            "        [9900, 9901, 9902,  ..., 9997, 9998, 9999]]" + ds + ")");
  // Exactly 1000 elements print in full; the format only looks at the printed elements.
  EXPECT_EQ(arange(0, 1000, 1, TensorOptions(kInt64, dev())).str().find("..."), std::string::npos);
  Tensor f = zeros({2000}, TensorOptions(kFloat32, dev()));
  f.narrow(0, 10, 1).fill_(1e-9);  // hidden by the summary: no scientific notation
  f.narrow(0, 1999, 1).fill_(1.5);
  EXPECT_EQ(f.str(), "tensor([0.0000, 0.0000, 0.0000,  ..., 0.0000, 0.0000, 1.5000]" + ds + ")");
  // Short dims of a large tensor are kept whole.
  Tensor g = arange(0, 2004, 1, TensorOptions(kInt64, dev())).view({2, 1002}).t();
  EXPECT_EQ(g.str(),
            "tensor([[   0, 1002],\n"
            "        [   1, 1003],\n"
            "        [   2, 1004],\n"
            "        ...,\n"
            "        [ 999, 2001],\n"
            "        [1000, 2002],\n"
            "        [1001, 2003]]" + ds + ")");
  Tensor h = arange(0, 8 * 8 * 20, 1, TensorOptions(kInt64, dev())).view({8, 8, 20});
  const std::string s = h.str();
  EXPECT_EQ(s.rfind("tensor([[[   0,    1,    2,  ...,   17,   18,   19],\n         [  20,", 0), 0u);
  EXPECT_NE(s.find("]],\n\n        ...,\n\n        [[ 800,"), std::string::npos);  // summarized outer dim
  EXPECT_NE(s.find("],\n         ...,\n         ["), std::string::npos);           // summarized middle dim
}

TEST(TensorPrint, UndefinedTensor) { EXPECT_EQ(Tensor().str(), "tensor(undefined)"); }

}  // namespace
}  // namespace rtx::testing
