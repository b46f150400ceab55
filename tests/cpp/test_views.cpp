// View ops: values against index arithmetic on the base (whose elements hold their own flat index),
// geometry (sizes, strides, offset), storage sharing (no copy, writes visible through the base), errors,
// and first and second order gradients.
#include <cmath>

#include "test_utils.h"

namespace rtx::testing {
namespace {

class ViewTest : public DeviceTest {
 protected:
  // A float64 tensor of shape whose element at flat index i holds i.
  Tensor base(const Shape& shape) const {
    const int64_t n = numel(shape);
    std::vector<double> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>(i);
    return make(v, shape, dev());
  }
};
INSTANTIATE_DEVICE_TESTS(ViewTest);

// Row-major flat indices of an index grid: for (i, j, ...) in sizes, f(i, j, ...).
std::vector<double> grid2(int64_t n0, int64_t n1, const std::function<int64_t(int64_t, int64_t)>& f) {
  std::vector<double> out;
  for (int64_t i = 0; i < n0; ++i)
    for (int64_t j = 0; j < n1; ++j) out.push_back(static_cast<double>(f(i, j)));
  return out;
}
std::vector<double> grid3(int64_t n0, int64_t n1, int64_t n2, const std::function<int64_t(int64_t, int64_t, int64_t)>& f) {
  std::vector<double> out;
  for (int64_t i = 0; i < n0; ++i)
    for (int64_t j = 0; j < n1; ++j)
      for (int64_t k = 0; k < n2; ++k) out.push_back(static_cast<double>(f(i, j, k)));
  return out;
}
std::vector<double> list(std::initializer_list<int64_t> idx) { return std::vector<double>(idx.begin(), idx.end()); }

// v aliases b: same storage, and a write through v shows in b at the element v maps it to.
::testing::AssertionResult aliases(const Tensor& v, const Tensor& b) {
  if (!v.shares_storage(b)) return ::testing::AssertionFailure() << "does not share storage";
  if (v.numel() == 0) return ::testing::AssertionSuccess();
  const std::vector<double> before = values(v);
  Tensor first = v;
  while (first.dim() > 0) first = first.select(0, 0);
  const int64_t target = static_cast<int64_t>(before[0]);  // the base index of v's first element
  NoGradGuard no_grad;
  first.fill_(-1.0);
  const std::vector<double> after = values(b);
  Tensor fix = b.view({-1}).narrow(0, target, 1);
  fix.fill_(static_cast<double>(target));  // restore
  if (after[target] != -1.0) return ::testing::AssertionFailure() << "write through the view not visible in the base";
  return ::testing::AssertionSuccess();
}

Fn unary(std::function<Tensor(const Tensor&)> f) {
  return [f](const TensorList& in) { return TensorList{f(in[0])}; };
}

// ---- view, reshape ----------------------------------------------------------------------------

TEST_P(ViewTest, View) {
  Tensor b = base({2, 3, 4});
  for (const Shape& s : std::vector<Shape>{{4, 6}, {24}, {2, 12}, {2, 1, 3, 4}, {1, 24, 1}}) {
    Tensor v = b.view(s);
    EXPECT_EQ(v.sizes(), s);
    Shape want(s.size(), 1);
    for (size_t d = s.size() - 1; d > 0; --d) want[d - 1] = want[d] * s[d];
    EXPECT_EQ(v.strides(), want);
    EXPECT_EQ(values(v), values(b));
    EXPECT_TRUE(aliases(v, b));
  }
  EXPECT_EQ(b.view({-1, 4}).sizes(), (Shape{6, 4}));
  EXPECT_EQ(b.view({2, -1, 2}).sizes(), (Shape{2, 6, 2}));
  EXPECT_EQ(b.view({-1}).sizes(), (Shape{24}));
  // A non-contiguous tensor whose dims still merge: rows of stride 12 and columns of stride 4.
  Tensor s = b.select(2, 1);  // [2, 3], strides [12, 4]
  Tensor flat = s.view({6});
  EXPECT_EQ(flat.strides(), (Shape{4}));
  EXPECT_EQ(values(flat), list({1, 5, 9, 13, 17, 21}));
  EXPECT_TRUE(aliases(flat, b));
  Tensor split = s.view({3, 2});
  EXPECT_EQ(split.strides(), (Shape{8, 4}));
  // Scalars and empty tensors.
  Tensor sc = full({}, 5.0, dev());
  EXPECT_EQ(sc.view({1, 1}).sizes(), (Shape{1, 1}));
  EXPECT_EQ(sc.view({1}).view({}).dim(), 0);
  EXPECT_EQ(zeros({0, 3}, dev()).view({-1}).sizes(), (Shape{0}));
  EXPECT_EQ(zeros({0, 3}, dev()).view({3, 0, 5}).sizes(), (Shape{3, 0, 5}));
}

TEST_P(ViewTest, ViewErrors) {
  Tensor b = base({2, 3, 4});
  EXPECT_TRUE(throws<ShapeError>([&] { b.view({5, 5}); }, "[view] shape [5, 5] is invalid for input of size 24"));
  EXPECT_TRUE(throws<ShapeError>([&] { b.view({-1, 5}); }, "[view] shape [-1, 5] is invalid for input of size 24"));
  EXPECT_TRUE(throws<ShapeError>([&] { b.view({-1, -1}); }, "only one dimension can be inferred"));
  EXPECT_TRUE(throws<ShapeError>([&] { b.view({-2, 12}); }, "invalid size -2"));
  EXPECT_TRUE(throws<ShapeError>([&] { zeros({0, 3}, dev()).view({-1, 0}); }, "invalid for input of size 0"));
  EXPECT_TRUE(throws<ShapeError>([&] { b.transpose(0, 2).view({24}); }, "use reshape()"));
}

// view_dtype reads the same bytes as another dtype: the host's own reinterpretation of them is the
// reference.
TEST_P(ViewTest, ViewDtypeReadsTheSameBytes) {
  const std::vector<float> floats = {1.5f, -2.25f, 3.0f, 1e-3f, -7.0f, 65504.0f};
  const Tensor f = make(std::vector<double>(floats.begin(), floats.end()), {2, 3}, dev(), kFloat32);
  std::vector<int16_t> halves(12);
  std::memcpy(halves.data(), floats.data(), 24);

  const Tensor same = f.view_dtype(kInt32);  // equal sizes: the geometry is kept
  EXPECT_EQ(same.sizes(), (Shape{2, 3}));
  EXPECT_TRUE(same.shares_storage(f) && !same.requires_grad());
  const std::vector<int32_t> bits = same.tolist<int32_t>();
  EXPECT_EQ(std::memcmp(bits.data(), floats.data(), 24), 0);

  const Tensor narrow16 = f.view_dtype(kInt16);  // each float becomes two int16 along the last dim
  EXPECT_EQ(narrow16.sizes(), (Shape{2, 6}));
  EXPECT_EQ(narrow16.strides(), (Shape{6, 1}));
  EXPECT_EQ(narrow16.tolist<int16_t>(), halves);
  EXPECT_TRUE(same_bytes(narrow16.view_dtype(kFloat32), f));  // and back

  // A slice of the last dimension: the offset and the other strides scale.
  const Tensor column = f.narrow(1, 1, 2).view_dtype(kInt16);
  EXPECT_EQ(column.sizes(), (Shape{2, 4}));
  EXPECT_EQ(column.strides(), (Shape{6, 1}));
  EXPECT_EQ(column.storage_offset(), 2);
  EXPECT_EQ(column.tolist<int16_t>(), (std::vector<int16_t>{halves[2], halves[3], halves[4], halves[5], halves[8],
                                                             halves[9], halves[10], halves[11]}));

  // Writes through the view land in the base.
  {
    NoGradGuard no_grad;
    Tensor words = f.clone().view_dtype(kInt16);
    words.select(0, 1).fill_(0.0);
    EXPECT_EQ(words.view_dtype(kFloat32).tolist<float>(), (std::vector<float>{1.5f, -2.25f, 3.0f, 0, 0, 0}));
  }
  const Tensor leaf = f.detach().requires_grad_(true);
  EXPECT_FALSE(leaf.view_dtype(kFloat32).requires_grad());  // no gradient flows through a reinterpretation

  EXPECT_TRUE(throws<ShapeError>([&] { f.t().view_dtype(kInt16); }, "the last dimension must have stride 1"));
  EXPECT_TRUE(throws<ShapeError>([&] { narrow16.narrow(1, 0, 3).view_dtype(kFloat32); }, "must be a multiple of 2"));
  EXPECT_TRUE(throws<ShapeError>([&] { narrow16.narrow(1, 1, 4).view_dtype(kFloat32); }, "storage offset 1"));
  EXPECT_TRUE(throws<ShapeError>([&] { f.select(0, 0).select(0, 0).view_dtype(kInt64); }, "0-d tensor"));
  EXPECT_TRUE(throws<ShapeError>([&] { f.view_dtype(kFloat64); }, "float32 tensor of shape [2, 3]"));
}

TEST_P(ViewTest, Reshape) {
  Tensor b = base({2, 3, 4});
  Tensor v = b.reshape({6, -1});
  EXPECT_EQ(v.sizes(), (Shape{6, 4}));
  EXPECT_TRUE(aliases(v, b));  // a view when the strides allow
  Tensor t = b.transpose(1, 2);  // [2, 4, 3]
  Tensor r = t.reshape({8, 3});
  EXPECT_FALSE(r.shares_storage(b));  // no view exists: a copy
  EXPECT_TRUE(r.is_contiguous());
  EXPECT_EQ(values(r), grid3(2, 4, 3, [](int64_t i, int64_t j, int64_t k) { return i * 12 + k * 4 + j; }));
  Tensor sv = b.select(2, 1).reshape({-1});  // non-contiguous but viewable
  EXPECT_TRUE(sv.shares_storage(b));
  EXPECT_EQ(rtx::reshape(b, {24}).sizes(), (Shape{24}));
  EXPECT_TRUE(throws<ShapeError>([&] { b.reshape({7, -1}); }, "[reshape] shape [7, -1] is invalid for input of size 24"));
}

TEST_P(ViewTest, ViewAndReshapeGradients) {
  Tensor x = leaf({2, 3, 2}, dev());
  EXPECT_TRUE(gradcheck(unary([](const Tensor& t) { return t.view({3, 4}); }), {x}));
  EXPECT_TRUE(gradcheck(unary([](const Tensor& t) { return t.transpose(0, 2).reshape({-1}); }), {x}));
  EXPECT_TRUE(gradgradcheck(unary([](const Tensor& t) { return t.view({-1}) * t.view({-1}); }), {x}));
  Tensor y = x.view({12});
  EXPECT_EQ(y.grad_fn()->name(), "view");
}

// ---- permute, transpose, t, mT ----------------------------------------------------------------

TEST_P(ViewTest, Permute) {
  Tensor b = base({2, 3, 4});
  Tensor p = b.permute({2, 0, 1});
  EXPECT_EQ(p.sizes(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (Shape{1, 12, 4}));
  EXPECT_EQ(values(p), grid3(4, 2, 3, [](int64_t k, int64_t i, int64_t j) { return i * 12 + j * 4 + k; }));
  EXPECT_TRUE(aliases(p, b));
  EXPECT_EQ(b.permute({-1, 0, -2}).sizes(), (Shape{4, 2, 3}));
  EXPECT_EQ(full({}, 1.0, dev()).permute({}).dim(), 0);
  EXPECT_TRUE(throws<ShapeError>([&] { b.permute({0, 1}); }, "[permute] got 2 dims [0, 1] for a 3-d tensor"));
  EXPECT_TRUE(throws<IndexError>([&] { b.permute({0, 1, 1}); }, "[permute] dim 1 repeats"));
  EXPECT_TRUE(throws<IndexError>([&] { b.permute({0, 1, 3}); }, "[permute] dim 3 out of range"));
  Tensor x = leaf({2, 3, 4}, dev());
  EXPECT_TRUE(gradcheck(unary([](const Tensor& t) { return t.permute({1, 2, 0}); }), {x}));
  EXPECT_TRUE(gradgradcheck(unary([](const Tensor& t) { return t.permute({2, 0, 1}) * t.permute({2, 0, 1}); }), {x}));
}

TEST_P(ViewTest, TransposeTAndMT) {
  Tensor b = base({2, 3, 4});
  Tensor t = b.transpose(0, 2);
  EXPECT_EQ(t.sizes(), (Shape{4, 3, 2}));
  EXPECT_EQ(t.strides(), (Shape{1, 4, 12}));
  EXPECT_EQ(values(t), grid3(4, 3, 2, [](int64_t k, int64_t j, int64_t i) { return i * 12 + j * 4 + k; }));
  EXPECT_TRUE(aliases(t, b));
  EXPECT_EQ(b.transpose(-1, -2).sizes(), (Shape{2, 4, 3}));
  EXPECT_EQ(values(b.transpose(1, 1)), values(b));
  EXPECT_EQ(rtx::transpose(full({}, 2.0, dev()), 0, -1).dim(), 0);
  EXPECT_TRUE(throws<IndexError>([&] { b.transpose(0, 3); }, "[transpose] dim 3 out of range"));
  // t: matrices transpose, vectors and scalars stay.
  Tensor m = base({3, 5});
  EXPECT_EQ(values(m.t()), grid2(5, 3, [](int64_t j, int64_t i) { return i * 5 + j; }));
  EXPECT_EQ(m.t().strides(), (Shape{1, 5}));
  EXPECT_TRUE(aliases(m.t(), m));
  Tensor v = base({4});
  EXPECT_TRUE(v.t().is_same(v));
  EXPECT_EQ(full({}, 1.0, dev()).t().dim(), 0);
  EXPECT_TRUE(throws<ShapeError>([&] { b.t(); }, "[t] expects a tensor with <= 2 dims, got shape [2, 3, 4]"));
  // mT: the last two dims.
  Tensor mt = b.mT();
  EXPECT_EQ(mt.sizes(), (Shape{2, 4, 3}));
  EXPECT_EQ(values(mt), grid3(2, 4, 3, [](int64_t i, int64_t k, int64_t j) { return i * 12 + j * 4 + k; }));
  EXPECT_TRUE(aliases(mt, b));
  EXPECT_TRUE(throws<ShapeError>([&] { v.mT(); }, "[mT] expects at least 2 dims, got shape [4]"));
  Tensor x = leaf({3, 2, 2}, dev());
  EXPECT_TRUE(gradcheck(unary([](const Tensor& a) { return a.transpose(0, 1); }), {x}));
  EXPECT_TRUE(gradcheck(unary([](const Tensor& a) { return a.mT(); }), {x}));
  Tensor y = leaf({3, 2}, dev());
  EXPECT_TRUE(gradgradcheck(unary([](const Tensor& a) { return a.t() * a.t(); }), {y}));
}

// ---- narrow, slice, select --------------------------------------------------------------------

TEST_P(ViewTest, Narrow) {
  Tensor b = base({4, 5});
  Tensor n = b.narrow(1, 1, 3);
  EXPECT_EQ(n.sizes(), (Shape{4, 3}));
  EXPECT_EQ(n.strides(), (Shape{5, 1}));
  EXPECT_EQ(n.storage_offset(), 1);
  EXPECT_EQ(values(n), grid2(4, 3, [](int64_t i, int64_t j) { return i * 5 + j + 1; }));
  EXPECT_TRUE(aliases(n, b));
  EXPECT_EQ(values(b.narrow(0, -2, 2)), grid2(2, 5, [](int64_t i, int64_t j) { return (i + 2) * 5 + j; }));
  EXPECT_EQ(b.narrow(-1, 5, 0).sizes(), (Shape{4, 0}));
  EXPECT_TRUE(throws<IndexError>([&] { b.narrow(1, 3, 3); }, "[narrow] start 3 + length 3 exceeds dim 1 of size 5"));
  EXPECT_TRUE(throws<IndexError>([&] { b.narrow(0, 5, 1); }, "[narrow] start 5 out of range"));
  EXPECT_TRUE(throws<IndexError>([&] { b.narrow(0, 0, -1); }, "[narrow]"));
  EXPECT_TRUE(throws<IndexError>([&] { b.narrow(2, 0, 1); }, "[narrow] dim 2 out of range"));
  EXPECT_TRUE(throws<IndexError>([&] { full({}, 1.0, dev()).narrow(0, 0, 1); }, "[narrow] cannot narrow a 0-d tensor"));
  Tensor x = leaf({4, 3}, dev());
  EXPECT_TRUE(gradcheck(unary([](const Tensor& t) { return t.narrow(0, 1, 2); }), {x}));
}

TEST_P(ViewTest, SliceStepsAndPythonBounds) {
  Tensor b = base({10});
  auto idx = [&](std::optional<int64_t> s, std::optional<int64_t> e, int64_t step = 1) {
    return values(b.slice(0, s, e, step));
  };
  EXPECT_EQ(idx(2, 7), list({2, 3, 4, 5, 6}));
  EXPECT_EQ(idx(std::nullopt, std::nullopt, 3), list({0, 3, 6, 9}));
  EXPECT_EQ(idx(1, std::nullopt, 2), list({1, 3, 5, 7, 9}));
  EXPECT_EQ(idx(1, -1, 3), list({1, 4, 7}));
  EXPECT_EQ(idx(-3, std::nullopt), list({7, 8, 9}));
  EXPECT_EQ(idx(std::nullopt, -7), list({0, 1, 2}));
  EXPECT_EQ(idx(-100, 100), list({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));  // clamped like Python
  EXPECT_EQ(idx(-100, -8), list({0, 1}));
  EXPECT_EQ(idx(8, 100, 5), list({8}));
  EXPECT_EQ(idx(5, 2), list({}));  // start after end: empty
  EXPECT_EQ(idx(100, 200), list({}));
  EXPECT_EQ(idx(-2, -5), list({}));
  EXPECT_EQ(idx(0, 10, 100), list({0}));
  EXPECT_EQ(b.slice(0, 5, 2).storage_offset(), 5);
  EXPECT_EQ(b.slice(0, 100, 200).sizes(), (Shape{0}));
  Tensor s = b.slice(0, 1, std::nullopt, 4);
  EXPECT_EQ(s.strides(), (Shape{4}));
  EXPECT_EQ(s.storage_offset(), 1);
  EXPECT_TRUE(aliases(s, b));
  // Along an inner dim, and a slice of a slice.
  Tensor m = base({3, 8});
  Tensor c = m.slice(1, 1, 7, 2);
  EXPECT_EQ(c.sizes(), (Shape{3, 3}));
  EXPECT_EQ(c.strides(), (Shape{8, 2}));
  EXPECT_EQ(values(c), grid2(3, 3, [](int64_t i, int64_t j) { return i * 8 + 1 + 2 * j; }));
  EXPECT_TRUE(aliases(c, m));
  Tensor cc = c.slice(1, 1, std::nullopt, 2).slice(0, -2);
  EXPECT_EQ(values(cc), grid2(2, 1, [](int64_t i, int64_t) { return (i + 1) * 8 + 3; }));
  EXPECT_EQ(cc.strides(), (Shape{8, 4}));
  EXPECT_TRUE(throws<ValueError>([&] { b.slice(0, 0, 5, 0); }, "[slice] step must be positive, got 0"));
  EXPECT_TRUE(throws<ValueError>([&] { b.slice(0, 0, 5, -1); }, "[slice] step must be positive, got -1"));
  EXPECT_TRUE(throws<IndexError>([&] { m.slice(2, 0, 1); }, "[slice] dim 2 out of range"));
  Tensor x = leaf({3, 7}, dev());
  EXPECT_TRUE(gradcheck(unary([](const Tensor& t) { return t.slice(1, 1, std::nullopt, 3); }), {x}));
  EXPECT_TRUE(gradcheck(unary([](const Tensor& t) { return t.slice(0, -2, 100); }), {x}));
  EXPECT_TRUE(gradgradcheck(unary([](const Tensor& t) { return t.slice(1, 0, 5, 2) * t.slice(1, 0, 5, 2); }), {x}));
}

TEST_P(ViewTest, Select) {
  Tensor b = base({2, 3, 4});
  Tensor s = b.select(1, 2);
  EXPECT_EQ(s.sizes(), (Shape{2, 4}));
  EXPECT_EQ(s.strides(), (Shape{12, 1}));
  EXPECT_EQ(s.storage_offset(), 8);
  EXPECT_EQ(values(s), grid2(2, 4, [](int64_t i, int64_t k) { return i * 12 + 8 + k; }));
  EXPECT_TRUE(aliases(s, b));
  EXPECT_EQ(values(b.select(-1, -1)), grid2(2, 3, [](int64_t i, int64_t j) { return i * 12 + j * 4 + 3; }));
  EXPECT_EQ(values(b[1]), grid2(3, 4, [](int64_t j, int64_t k) { return 12 + j * 4 + k; }));
  Tensor e = b[1][2][3];
  EXPECT_EQ(e.dim(), 0);
  EXPECT_EQ(e.item<double>(), 23);
  EXPECT_TRUE(aliases(e, b));
  EXPECT_TRUE(throws<IndexError>([&] { b.select(1, 3); }, "[select] index 3 is out of range for dim 1 of size 3"));
  EXPECT_TRUE(throws<IndexError>([&] { b.select(0, -3); }, "[select] index -3 is out of range for dim 0 of size 2"));
  EXPECT_TRUE(throws<IndexError>([&] { b.select(3, 0); }, "[select] dim 3 out of range"));
  EXPECT_TRUE(throws<IndexError>([&] { e.select(0, 0); }, "[select] cannot index a 0-d tensor"));
  Tensor x = leaf({3, 4}, dev());
  EXPECT_TRUE(gradcheck(unary([](const Tensor& t) { return t.select(1, -2); }), {x}));
  EXPECT_TRUE(gradgradcheck(unary([](const Tensor& t) { return t.select(0, 1) * t.select(0, 2); }), {x}));
}

// ---- expand -----------------------------------------------------------------------------------

TEST_P(ViewTest, Expand) {
  Tensor col = base({3, 1});
  Tensor e = col.expand({3, 4});
  EXPECT_EQ(e.sizes(), (Shape{3, 4}));
  EXPECT_EQ(e.strides(), (Shape{1, 0}));
  EXPECT_EQ(values(e), grid2(3, 4, [](int64_t i, int64_t) { return i; }));
  EXPECT_TRUE(e.shares_storage(col));
  col.select(0, 1).fill_(-5.0);  // one base element shows in a whole row
  EXPECT_EQ(values(e.select(0, 1)), std::vector<double>(4, -5.0));
  // New leading dims and -1.
  Tensor row = base({4});
  Tensor lead = row.expand({2, 3, 4});
  EXPECT_EQ(lead.strides(), (Shape{0, 0, 1}));
  EXPECT_EQ(values(lead), grid3(2, 3, 4, [](int64_t, int64_t, int64_t k) { return k; }));
  EXPECT_EQ(base({3, 1}).expand({2, -1, 5}).sizes(), (Shape{2, 3, 5}));
  EXPECT_EQ(base({3, 1}).expand({-1, -1}).sizes(), (Shape{3, 1}));
  EXPECT_EQ(full({}, 7.0, dev()).expand({2, 2}).strides(), (Shape{0, 0}));
  EXPECT_EQ(base({1}).expand({0}).sizes(), (Shape{0}));
  EXPECT_EQ(values(rtx::expand(row, {1, 4})), values(row));
  EXPECT_TRUE(row.expand({4}).is_same(row));
  EXPECT_EQ(row.expand_as(zeros({2, 4}, dev())).sizes(), (Shape{2, 4}));
  EXPECT_TRUE(throws<ShapeError>([&] { row.expand({3}); }, "[expand] size 4 at dim 0 cannot expand to 3"));
  EXPECT_TRUE(throws<ShapeError>([&] { base({2, 4}).expand({4}); }, "[expand] target shape [4] has fewer dims"));
  EXPECT_TRUE(throws<ShapeError>([&] { row.expand({-1, 4}); }, "size -1 is not allowed for the new leading dim 0"));
  EXPECT_TRUE(throws<ShapeError>([&] { col.expand({3, -2}); }, "[expand]"));
}

TEST_P(ViewTest, ExpandGradients) {
  Tensor x = leaf({3, 1}, dev());
  EXPECT_TRUE(gradcheck(unary([](const Tensor& t) { return t.expand({2, 3, 4}); }), {x}));
  EXPECT_TRUE(gradgradcheck(unary([](const Tensor& t) { return t.expand({3, 4}) * t.expand({3, 4}); }), {x}));
  Tensor s = randn({}, TensorOptions(kFloat64, dev())).requires_grad_();
  EXPECT_TRUE(gradcheck(unary([](const Tensor& t) { return t.expand({2, 2}); }), {s}));
  // The gradient of each base element is the sum over its copies.
  Tensor r = make({1, 2}, {2, 1}, dev()).requires_grad_();
  r.expand({2, 3}).backward(make({1, 2, 3, 4, 5, 6}, {2, 3}, dev()));
  EXPECT_EQ(values(r.grad()), (std::vector<double>{6, 15}));
}

// ---- squeeze, unsqueeze, flatten, unflatten ---------------------------------------------------

TEST_P(ViewTest, SqueezeUnsqueeze) {
  Tensor b = base({2, 1, 3, 1});
  Tensor s = b.squeeze();
  EXPECT_EQ(s.sizes(), (Shape{2, 3}));
  EXPECT_EQ(values(s), values(b));
  EXPECT_TRUE(aliases(s, b));
  EXPECT_EQ(b.squeeze(1).sizes(), (Shape{2, 3, 1}));
  EXPECT_EQ(b.squeeze(-1).sizes(), (Shape{2, 1, 3}));
  EXPECT_TRUE(b.squeeze(0).is_same(b));  // size 2: unchanged
  EXPECT_EQ(base({1, 1}).squeeze().dim(), 0);
  EXPECT_EQ(full({}, 1.0, dev()).squeeze(0).dim(), 0);
  EXPECT_EQ(rtx::squeeze(b, 3).sizes(), (Shape{2, 1, 3}));
  EXPECT_TRUE(throws<IndexError>([&] { b.squeeze(4); }, "[squeeze] dim 4 out of range"));
  Tensor m = base({2, 3});
  EXPECT_EQ(m.unsqueeze(0).sizes(), (Shape{1, 2, 3}));
  EXPECT_EQ(m.unsqueeze(1).sizes(), (Shape{2, 1, 3}));
  EXPECT_EQ(m.unsqueeze(1).strides(), (Shape{3, 3, 1}));
  EXPECT_EQ(m.unsqueeze(2).sizes(), (Shape{2, 3, 1}));
  EXPECT_EQ(m.unsqueeze(-1).sizes(), (Shape{2, 3, 1}));
  EXPECT_EQ(m.unsqueeze(-1).strides(), (Shape{3, 1, 1}));
  EXPECT_EQ(m.unsqueeze(-3).sizes(), (Shape{1, 2, 3}));
  EXPECT_TRUE(aliases(m.unsqueeze(1), m));
  EXPECT_EQ(values(m.t().unsqueeze(1)), values(m.t()));
  EXPECT_EQ(m.t().unsqueeze(1).strides(), (Shape{1, 6, 3}));
  EXPECT_EQ(full({}, 1.0, dev()).unsqueeze(0).sizes(), (Shape{1}));
  EXPECT_TRUE(throws<IndexError>([&] { m.unsqueeze(3); }, "[unsqueeze] dim 3 out of range"));
  EXPECT_TRUE(throws<IndexError>([&] { m.unsqueeze(-4); }, "[unsqueeze] dim -4 out of range"));
  Tensor x = leaf({2, 1, 3}, dev());
  EXPECT_TRUE(gradcheck(unary([](const Tensor& t) { return t.squeeze(); }), {x}));
  EXPECT_TRUE(gradcheck(unary([](const Tensor& t) { return t.unsqueeze(2); }), {x}));
  EXPECT_TRUE(gradgradcheck(unary([](const Tensor& t) { return t.squeeze(1) * t.squeeze(1); }), {x}));
}

TEST_P(ViewTest, FlattenUnflatten) {
  Tensor b = base({2, 3, 4});
  Tensor f = b.flatten();
  EXPECT_EQ(f.sizes(), (Shape{24}));
  EXPECT_TRUE(aliases(f, b));
  EXPECT_EQ(b.flatten(1).sizes(), (Shape{2, 12}));
  EXPECT_EQ(b.flatten(0, 1).sizes(), (Shape{6, 4}));
  EXPECT_EQ(b.flatten(-2, -1).sizes(), (Shape{2, 12}));
  EXPECT_TRUE(b.flatten(1, 1).is_same(b));
  EXPECT_EQ(full({}, 3.0, dev()).flatten().sizes(), (Shape{1}));
  Tensor t = b.transpose(0, 2);  // non-contiguous: a copy
  Tensor tf = t.flatten();
  EXPECT_FALSE(tf.shares_storage(b));
  EXPECT_EQ(values(tf), grid3(4, 3, 2, [](int64_t k, int64_t j, int64_t i) { return i * 12 + j * 4 + k; }));
  EXPECT_TRUE(throws<ValueError>([&] { b.flatten(2, 1); }, "[flatten] start_dim 2 comes after end_dim 1"));
  EXPECT_TRUE(throws<IndexError>([&] { b.flatten(0, 3); }, "[flatten] dim 3 out of range"));
  Tensor m = base({2, 12});
  Tensor u = m.unflatten(1, {3, 4});
  EXPECT_EQ(u.sizes(), (Shape{2, 3, 4}));
  EXPECT_EQ(values(u), values(m));
  EXPECT_TRUE(aliases(u, m));
  EXPECT_EQ(m.unflatten(-1, {-1, 6}).sizes(), (Shape{2, 2, 6}));
  EXPECT_EQ(m.unflatten(0, {1, 2, 1}).sizes(), (Shape{1, 2, 1, 12}));
  EXPECT_TRUE(throws<ShapeError>([&] { m.unflatten(1, {5, -1}); }, "[unflatten] shape [5, -1] is invalid for input of size 12"));
  EXPECT_TRUE(throws<ValueError>([&] { m.unflatten(1, {}); }, "[unflatten] sizes must not be empty"));
  Tensor x = leaf({2, 3, 2}, dev());
  EXPECT_TRUE(gradcheck(unary([](const Tensor& a) { return a.flatten(1); }), {x}));
  EXPECT_TRUE(gradcheck(unary([](const Tensor& a) { return a.transpose(0, 1).flatten(); }), {x}));
  EXPECT_TRUE(gradcheck(unary([](const Tensor& a) { return a.unflatten(1, {3, 1}); }), {x}));
}

// ---- diagonal ---------------------------------------------------------------------------------

TEST_P(ViewTest, Diagonal) {
  Tensor b = base({3, 4});
  struct Case {
    int64_t offset;
    std::vector<double> want;
  };
  for (const Case& c : std::vector<Case>{{0, list({0, 5, 10})},
                                         {1, list({1, 6, 11})},
                                         {2, list({2, 7})},
                                         {3, list({3})},
                                         {4, list({})},
                                         {-1, list({4, 9})},
                                         {-2, list({8})},
                                         {-3, list({})},
                                         {-7, list({})}}) {
    Tensor d = b.diagonal(c.offset);
    EXPECT_EQ(values(d), c.want) << "offset " << c.offset;
    EXPECT_EQ(d.strides(), (Shape{5}));
    EXPECT_TRUE(aliases(d, b)) << "offset " << c.offset;
  }
  // Swapped dims transpose first: offsets count along dim2.
  EXPECT_EQ(values(b.diagonal(1, 1, 0)), list({4, 9}));
  EXPECT_EQ(values(b.diagonal(-1, 1, 0)), list({1, 6, 11}));
  // Batched: the diagonal becomes the last dim.
  Tensor t = base({2, 3, 4});
  Tensor d = t.diagonal(0, 0, 2);
  EXPECT_EQ(d.sizes(), (Shape{3, 2}));
  EXPECT_EQ(d.strides(), (Shape{4, 13}));
  EXPECT_EQ(values(d), grid2(3, 2, [](int64_t j, int64_t i) { return i * 12 + j * 4 + i; }));
  EXPECT_TRUE(aliases(d, t));
  Tensor d2 = t.diagonal(1, -2, -1);
  EXPECT_EQ(d2.sizes(), (Shape{2, 3}));
  EXPECT_EQ(values(d2), grid2(2, 3, [](int64_t i, int64_t j) { return i * 12 + j * 4 + j + 1; }));
  EXPECT_TRUE(throws<ShapeError>([&] { base({3}).diagonal(); }, "[diagonal] needs at least 2 dims"));
  EXPECT_TRUE(throws<ValueError>([&] { b.diagonal(0, 1, -1); }, "[diagonal] dim1 and dim2 must differ"));
  EXPECT_TRUE(throws<IndexError>([&] { b.diagonal(0, 0, 2); }, "[diagonal] dim 2 out of range"));
  Tensor x = leaf({3, 4}, dev());
  for (int64_t off : {0, 2, -1})
    EXPECT_TRUE(gradcheck(unary([off](const Tensor& a) { return a.diagonal(off); }), {x})) << off;
  Tensor y = leaf({2, 3, 3}, dev());
  EXPECT_TRUE(gradcheck(unary([](const Tensor& a) { return a.diagonal(0, 1, 2); }), {y}));
  EXPECT_TRUE(gradgradcheck(unary([](const Tensor& a) { return a.diagonal() * a.diagonal(); }), {x}));
}

// ---- as_strided -------------------------------------------------------------------------------

TEST_P(ViewTest, AsStrided) {
  Tensor b = base({6});
  Tensor w = b.as_strided({3, 2}, {1, 1});  // overlapping sliding windows
  EXPECT_EQ(values(w), list({0, 1, 1, 2, 2, 3}));
  EXPECT_EQ(w.strides(), (Shape{1, 1}));
  EXPECT_TRUE(aliases(w, b));
  Tensor o = b.as_strided({2, 2}, {2, 1}, 2);
  EXPECT_EQ(o.storage_offset(), 2);
  EXPECT_EQ(values(o), list({2, 3, 4, 5}));
  // The offset defaults to the tensor's own; strides count storage elements, not the view's.
  Tensor s = b.narrow(0, 1, 4);
  EXPECT_EQ(values(s.as_strided({2}, {3})), list({1, 4}));
  EXPECT_EQ(values(rtx::as_strided(b, {2, 3}, {1, 2}, 0)), list({0, 2, 4, 1, 3, 5}));
  EXPECT_EQ(b.as_strided({0, 100}, {100, 100}).numel(), 0);
  EXPECT_TRUE(throws<IndexError>([&] { b.as_strided({3, 2}, {2, 2}); }, "reach element 6, beyond the storage's 6 elements"));
  EXPECT_TRUE(throws<IndexError>([&] { b.as_strided({1}, {1}, 6); }, "[as_strided]"));
  EXPECT_TRUE(throws<ShapeError>([&] { b.as_strided({3, 2}, {1}); }, "[as_strided] 2 sizes but 1 strides"));
  EXPECT_TRUE(throws<ValueError>([&] { b.as_strided({-1}, {1}); }, "[as_strided] negative size"));
  EXPECT_TRUE(throws<ValueError>([&] { b.as_strided({2}, {-1}); }, "[as_strided] negative stride"));
  EXPECT_TRUE(throws<ValueError>([&] { b.as_strided({2}, {1}, -1); }, "[as_strided] negative storage offset"));
}

TEST_P(ViewTest, AsStridedGradients) {
  Tensor x = leaf({6}, dev());
  EXPECT_TRUE(gradcheck(unary([](const Tensor& a) { return a.as_strided({3, 2}, {1, 1}); }), {x}));
  EXPECT_TRUE(gradcheck(unary([](const Tensor& a) { return a.as_strided({2, 2}, {1, 2}, 1); }), {x}));
  // Overlapping windows: each element collects every window position it appears in.
  Tensor y = make({1, 2, 3, 4}, {4}, dev()).requires_grad_();
  y.as_strided({3, 2}, {1, 1}).backward(ones({3, 2}, TensorOptions(kFloat64, dev())));
  EXPECT_EQ(values(y.grad()), (std::vector<double>{1, 2, 2, 1}));
}

// ---- chains of views --------------------------------------------------------------------------

TEST_P(ViewTest, ChainedViewsComposeGeometry) {
  Tensor b = base({4, 6, 5});
  Tensor v = b.permute({2, 0, 1}).slice(1, 1, std::nullopt, 2).select(2, -1).unsqueeze(0).expand({2, 5, 2});
  EXPECT_EQ(v.sizes(), (Shape{2, 5, 2}));
  EXPECT_EQ(v.strides(), (Shape{0, 1, 60}));
  EXPECT_EQ(v.storage_offset(), 30 + 25);
  EXPECT_EQ(values(v), grid3(2, 5, 2, [](int64_t, int64_t k, int64_t i) { return (1 + 2 * i) * 30 + 5 * 5 + k; }));
  EXPECT_TRUE(v.shares_storage(b));
  Tensor x = leaf({4, 3, 2}, dev());
  EXPECT_TRUE(gradcheck(unary([](const Tensor& a) { return a.permute({2, 0, 1}).slice(1, 1, std::nullopt, 2).select(2, -1); }),
                        {x}));
}

}  // namespace
}  // namespace rtx::testing
