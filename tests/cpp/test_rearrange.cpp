// Rearranging ops and matmul-based products built from other ops: values against index arithmetic
// and float64 loops, on every device; first-order gradients; errors naming the op.
#include "test_utils.h"

namespace rtx::testing {
namespace {

class RearrangeTest : public DeviceTest {
 protected:
  // A float64 tensor of shape whose element at flat index i holds i.
  Tensor base(const Shape& shape) const {
    std::vector<double> v(static_cast<size_t>(numel(shape)));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
    return make(v, shape, dev());
  }
};
INSTANTIATE_DEVICE_TESTS(RearrangeTest);

std::vector<double> ints(std::initializer_list<int> v) { return std::vector<double>(v.begin(), v.end()); }

Fn unary(std::function<Tensor(const Tensor&)> f) {
  return [f](const TensorList& in) { return TensorList{f(in[0])}; };
}

TEST_P(RearrangeTest, FlipReversesTheNamedDims) {
  const Tensor x = base({2, 3});
  EXPECT_EQ(values(flip(x, {1})), ints({2, 1, 0, 5, 4, 3}));
  EXPECT_EQ(values(flip(x, {0, -1})), ints({5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(values(fliplr(x)), values(flip(x, {1})));
  EXPECT_EQ(values(flipud(x)), ints({3, 4, 5, 0, 1, 2}));
  EXPECT_EQ(values(flip(x.t(), {0})), ints({2, 5, 1, 4, 0, 3}));  // strided input
  Tensor copy = flip(x, {});
  EXPECT_FALSE(copy.shares_storage(x));
  EXPECT_TRUE(gradcheck(unary([](const Tensor& t) { return flip(t, {0, 1}); }), {leaf({2, 3}, dev())}));
  EXPECT_TRUE(throws<ValueError>([&] { flip(x, {1, -1}); }, "[flip] dims [1, -1] name dim 1 more than once"));
  EXPECT_TRUE(throws<ShapeError>([&] { fliplr(base({3})); }, "[fliplr]"));
}

TEST_P(RearrangeTest, RollWrapsAround) {
  const Tensor x = base({2, 3});
  EXPECT_EQ(values(roll(x, {1}, {1})), ints({2, 0, 1, 5, 3, 4}));
  EXPECT_EQ(values(roll(x, {-1}, {1})), ints({1, 2, 0, 4, 5, 3}));
  EXPECT_EQ(values(roll(x, {7})), ints({5, 0, 1, 2, 3, 4}));  // flattened, 7 = 1 (mod 6)
  EXPECT_EQ(values(roll(x, {1, 1}, {0, 1})), ints({5, 3, 4, 2, 0, 1}));
  EXPECT_EQ(values(roll(x, {3}, {1})), values(x));
  EXPECT_TRUE(gradcheck(unary([](const Tensor& t) { return roll(t, {2, -1}, {1, 0}); }), {leaf({2, 3}, dev())}));
  EXPECT_TRUE(throws<ValueError>([&] { roll(x, {1, 2}, {0}); }, "[roll] shifts [1, 2] and dims [0]"));
}

TEST_P(RearrangeTest, MovedimKeepsTheOtherDimsInOrder) {
  const Tensor x = base({2, 3, 4});
  EXPECT_EQ(movedim(x, {0}, {2}).sizes(), (Shape{3, 4, 2}));
  EXPECT_EQ(movedim(x, {2, 0}, {0, 1}).sizes(), (Shape{4, 2, 3}));
  EXPECT_TRUE(movedim(x, {0}, {-1}).shares_storage(x));
  EXPECT_EQ(values(movedim(x, {0}, {2})), values(x.permute({1, 2, 0})));
  EXPECT_TRUE(throws<ValueError>([&] { movedim(x, {0, 1}, {1}); }, "[movedim]"));
}

TEST_P(RearrangeTest, RepeatInterleave) {
  const Tensor x = base({2, 2});
  EXPECT_EQ(values(repeat_interleave(x, 2)), ints({0, 0, 1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(values(repeat_interleave(x, 2, 0)), ints({0, 1, 0, 1, 2, 3, 2, 3}));
  EXPECT_EQ(repeat_interleave(x, 3, 1).sizes(), (Shape{2, 6}));
  const Tensor counts = tensor(std::vector<int64_t>{1, 0, 2, 1}, TensorOptions(kInt64, dev()));
  EXPECT_EQ(values(repeat_interleave(x, counts)), ints({0, 2, 2, 3}));
  EXPECT_EQ(values(repeat_interleave(x, tensor(std::vector<int64_t>{0, 2}, TensorOptions(kInt64, dev())), 1)),
            ints({1, 1, 3, 3}));
  // The grouped-query attention idiom: [B, kv_heads, T, D] -> [B, heads, T, D].
  EXPECT_TRUE(gradcheck(unary([](const Tensor& t) { return repeat_interleave(t, 3, 1); }), {leaf({1, 2, 2, 2}, dev())}));
  EXPECT_TRUE(throws<ShapeError>([&] { repeat_interleave(x, counts, 0); }, "[repeat_interleave] 4 repeats for a dim of size 2"));
  EXPECT_TRUE(throws<ValueError>([&] { repeat_interleave(x, -1); }, "non-negative"));
}

TEST_P(RearrangeTest, DiffIsTheForwardDifference) {
  const Tensor x = make({1, 4, 9, 16, 2, 0}, {2, 3}, dev());
  EXPECT_EQ(values(diff(x)), ints({3, 5, -14, -2}));
  EXPECT_EQ(values(diff(x, 1, 0)), ints({15, -2, -9}));
  EXPECT_EQ(values(diff(x, 2)), ints({2, 12}));
  EXPECT_EQ(values(diff(x, 1, -1, make({0, 0}, {2, 1}, dev()))), ints({1, 3, 5, 16, -14, -2}));
  EXPECT_EQ(values(diff(tensor({true, true, false}).to(dev()))), ints({0, 1}));
  EXPECT_TRUE(gradcheck(unary([](const Tensor& t) { return diff(t, 2, 1); }), {leaf({2, 4}, dev())}));
  EXPECT_TRUE(throws<ShapeError>([&] { diff(scalar_tensor(1.0, TensorOptions(kFloat64, dev()))); }, "[diff]"));
}

TEST_P(RearrangeTest, UnfoldMakesWindowViews) {
  const Tensor x = base({2, 5});
  const Tensor w = unfold(x, 1, 3, 2);
  EXPECT_EQ(w.sizes(), (Shape{2, 2, 3}));
  EXPECT_TRUE(w.shares_storage(x));
  EXPECT_EQ(values(w), ints({0, 1, 2, 2, 3, 4, 5, 6, 7, 7, 8, 9}));
  // Overlapping windows add their gradients.
  EXPECT_TRUE(gradcheck(unary([](const Tensor& t) { return unfold(t, 0, 2, 1) * 1.5; }), {leaf({4}, dev())}));
  EXPECT_TRUE(throws<ShapeError>([&] { unfold(x, 1, 6, 1); }, "[unfold] window size 6"));
}

TEST_P(RearrangeTest, MeshgridAndTakeAlongDim) {
  const Tensor a = make({1, 2, 3}, {3}, dev()), b = make({10, 20}, {2}, dev());
  const TensorList ij = meshgrid({a, b});
  EXPECT_EQ(ij[0].sizes(), (Shape{3, 2}));
  EXPECT_EQ(values(ij[0]), ints({1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(values(ij[1]), ints({10, 20, 10, 20, 10, 20}));
  const TensorList xy = meshgrid({a, b}, "xy");
  EXPECT_EQ(xy[0].sizes(), (Shape{2, 3}));
  EXPECT_EQ(values(xy[0]), ints({1, 2, 3, 1, 2, 3}));
  EXPECT_TRUE(throws<ShapeError>([&] { meshgrid({a, base({2, 2})}); }, "[meshgrid] expects 0-d or 1-d tensors"));
  // Row-wise picks, the index broadcast over the rows.
  const Tensor x = base({2, 3});
  const Tensor pick = tensor(std::vector<int64_t>{2, 0}, TensorOptions(kInt64, dev())).view({1, 2});
  EXPECT_EQ(values(take_along_dim(x, pick, 1)), ints({2, 0, 5, 3}));
  EXPECT_EQ(values(take_along_dim(x, tensor(std::vector<int64_t>{5, 1}, TensorOptions(kInt64, dev())))), ints({5, 1}));
  EXPECT_TRUE(gradcheck(unary([&](const Tensor& t) { return take_along_dim(t, pick, 1); }), {leaf({2, 3}, dev())}));
  EXPECT_TRUE(throws<ShapeError>([&] { take_along_dim(x, pick.view({2}), 1); }, "[take_along_dim]"));
}

TEST_P(RearrangeTest, ProductsAgainstLoops) {
  const Tensor a = make({1, 2, 3}, {3}, dev()), b = make({4, -1, 0.5}, {3}, dev());
  EXPECT_EQ(values(outer(a, b)), (std::vector<double>{4, -1, 0.5, 8, -2, 1, 12, -3, 1.5}));
  EXPECT_EQ(values(dot(a, b)), (std::vector<double>{3.5}));
  const Tensor m = base({2, 3});
  EXPECT_EQ(values(mv(m, a)), (std::vector<double>{8, 26}));
  const Tensor c = make({1, 1, 1, 1}, {2, 2}, dev());
  // 0.5 * c + 2 * (m @ m^T): m @ m^T = [[5, 14], [14, 50]].
  EXPECT_EQ(values(addmm(c, m, m.t(), 0.5, 2)), (std::vector<double>{10.5, 28.5, 28.5, 100.5}));
  // beta = 0 ignores the input, NaN included.
  const Tensor nan = full({2, 2}, NAN, TensorOptions(kFloat64, dev()));
  EXPECT_EQ(values(addmm(nan, m, m.t(), 0)), (std::vector<double>{5, 14, 14, 50}));
  EXPECT_EQ(values(baddbmm(c.unsqueeze(0), m.unsqueeze(0), m.t().unsqueeze(0), 1, 1)),
            (std::vector<double>{6, 15, 15, 51}));
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return TensorList{addmm(in[0], in[1], in[2], 0.5, 2)}; },
                        {leaf({2, 2}, dev(), 1), leaf({2, 3}, dev(), 2), leaf({3, 2}, dev(), 3)}));
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return TensorList{outer(in[0], in[1])}; },
                        {leaf({3}, dev(), 4), leaf({2}, dev(), 5)}));
  EXPECT_TRUE(throws<ShapeError>([&] { dot(a, m); }, "[dot] the second vector must have 1 dim"));
  EXPECT_TRUE(throws<DTypeError>([&] { dot(a, b.to(kFloat32)); }, "[dot] expects vectors of one dtype"));
  EXPECT_TRUE(throws<ShapeError>([&] { mv(m, b.narrow(0, 0, 2)); }, "[mv]"));
}

}  // namespace
}  // namespace rtx::testing
