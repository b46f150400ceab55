// The error types and messages of representative ops: shapes, dtypes, devices, indices, values,
// autograd misuse, impossible sizes and undefined tensors. Every message starts with the op in brackets.
#include <cmath>

#include "test_utils.h"

namespace rtx::testing {
namespace {

class ErrorTest : public DeviceTest {};
INSTANTIATE_DEVICE_TESTS(ErrorTest);

TEST(ErrorTypes, HierarchyAndMessages) {
  // Every library error is an rtx::Error, itself a std::runtime_error.
  EXPECT_TRUE(throws<Error>([] { throw ShapeError("[x] shape"); }, "[x] shape"));
  EXPECT_TRUE(throws<Error>([] { throw DTypeError("[x] dtype"); }, "dtype"));
  EXPECT_TRUE(throws<Error>([] { throw DeviceError("[x] device"); }, "device"));
  EXPECT_TRUE(throws<Error>([] { throw IndexError("[x] index"); }, "index"));
  EXPECT_TRUE(throws<Error>([] { throw ValueError("[x] value"); }, "value"));
  EXPECT_TRUE(throws<std::runtime_error>([] { throw OutOfMemoryError("[x] oom"); }, "oom"));
  // throws<> tells the types apart.
  EXPECT_FALSE(throws<ShapeError>([] { throw ValueError("[x] value"); }, "value"));
  EXPECT_FALSE(throws<ValueError>([] {}, ""));
}

// ---- ShapeError -------------------------------------------------------------------------------

TEST_P(ErrorTest, ShapeErrors) {
  Tensor a = zeros({2, 3}, dev()), b = zeros({4}, dev());
  EXPECT_TRUE(throws<ShapeError>([&] { add(a, b); }, "[add] shapes [2, 3] and [4] cannot be broadcast"));
  EXPECT_TRUE(throws<ShapeError>([&] { a * zeros({3, 3}, dev()); }, "[mul] shapes [2, 3] and [3, 3]"));
  EXPECT_TRUE(throws<ShapeError>([&] { a.add_(zeros({2, 2, 3}, dev())); }, "[add_] the result of shape [2, 2, 3]"));
  EXPECT_TRUE(throws<ShapeError>([&] { broadcast_shapes({2}, {3}, "myop"); }, "[myop] shapes [2] and [3]"));
  EXPECT_TRUE(throws<ShapeError>([&] { a.view({4}); }, "[view] shape [4] is invalid for input of size 6"));
  EXPECT_TRUE(throws<ShapeError>([&] { a.t().view({6}); }, "[view] a tensor of shape [3, 2] and strides [1, 3]"));
  EXPECT_TRUE(throws<ShapeError>([&] { a.expand({3, 3}); }, "[expand] size 2 at dim 0 cannot expand to 3"));
  EXPECT_TRUE(throws<ShapeError>([&] { a.permute({1}); }, "[permute]"));
  EXPECT_TRUE(throws<ShapeError>([&] { a.copy_(b); }, "[copy_]"));
  EXPECT_TRUE(throws<ShapeError>([&] { sum_to(b, {2, 4}); }, "[sum_to] a tensor of shape [4] cannot be summed to the larger shape [2, 4]"));
  Tensor x = zeros({2}, TensorOptions(kFloat64, dev(), true));
  EXPECT_TRUE(throws<ShapeError>([&] { x.set_grad(zeros({3}, TensorOptions(kFloat64, dev()))); }, "[set_grad] gradient shape [3]"));
  EXPECT_TRUE(throws<ShapeError>([&] { (x * 2).backward(); }, "[backward] a gradient can be created implicitly only for one-element outputs"));
  EXPECT_TRUE(throws<ShapeError>([&] { (x * 2).backward(zeros({3}, TensorOptions(kFloat64, dev()))); },
                                 "[backward] gradient 0 has shape [3] but its tensor has shape [2]"));
}

// ---- DTypeError -------------------------------------------------------------------------------

TEST_P(ErrorTest, DTypeErrors) {
  Tensor i = zeros({2}, TensorOptions(kInt64, dev()));
  Tensor bools = zeros({2}, TensorOptions(kBool, dev()));
  EXPECT_TRUE(throws<DTypeError>([&] { i.requires_grad_(); },
                                 "[requires_grad_] only floating point tensors can require gradients, but this one has dtype int64"));
  EXPECT_TRUE(throws<DTypeError>([&] { zeros({2}, TensorOptions(kInt32, dev(), true)); }, "dtype int32"));
  EXPECT_TRUE(throws<DTypeError>([&] { bools.requires_grad_(); }, "dtype bool"));
  EXPECT_TRUE(throws<DTypeError>([&] { neg(bools); }, "[neg] not supported for bool tensors"));
  EXPECT_TRUE(throws<DTypeError>([&] { i.add_(1.5); }, "[add_] the result has dtype float32, which cannot be written into a tensor of dtype int64"));
  EXPECT_TRUE(throws<DTypeError>([&] { i.data_ptr<float>(); }, "[data_ptr] tensor has dtype int64 but float32 was requested"));
  EXPECT_TRUE(throws<DTypeError>([&] { where(i, i, i); }, "[where] the condition must be a bool tensor, got int64"));
  Tensor x = zeros({2}, TensorOptions(kFloat64, dev(), true));
  EXPECT_TRUE(throws<DTypeError>([&] { x.set_grad(zeros({2}, TensorOptions(kFloat32, dev()))); },
                                 "[set_grad] gradient dtype float32 does not match tensor dtype float64"));
}

// ---- DeviceError ------------------------------------------------------------------------------

TEST(DeviceErrors, CudaWithoutCuda) {
  if (cuda::is_available()) GTEST_SKIP() << "CUDA is available here";
  const std::string reason = cuda::unavailable_reason();
  ASSERT_FALSE(reason.empty());
  // Every way of asking for a CUDA tensor raises DeviceError with the reason, and never crashes.
  EXPECT_TRUE(throws<DeviceError>([] { zeros({2}, Device(kCUDA)); }, "[zeros] cannot create a tensor on cuda:0: " + reason));
  EXPECT_TRUE(throws<DeviceError>([] { ones({2}, Device("cuda:1")); }, "[ones] cannot create a tensor on cuda:1"));
  EXPECT_TRUE(throws<DeviceError>([] { empty({2, 3}, kCUDA); }, "[empty] cannot create a tensor on cuda:0"));
  EXPECT_TRUE(throws<DeviceError>([] { full({}, 1.0, kCUDA); }, "[full]"));
  EXPECT_TRUE(throws<DeviceError>([] { arange(5, TensorOptions(kInt64, kCUDA)); }, "[arange]"));
  EXPECT_TRUE(throws<DeviceError>([] { linspace(0, 1, 3, kCUDA); }, "[linspace]"));
  EXPECT_TRUE(throws<DeviceError>([] { eye(3, -1, kCUDA); }, "[eye]"));
  EXPECT_TRUE(throws<DeviceError>([] { tensor({1.0}, kCUDA); }, "[tensor]"));
  const float v[] = {1, 2};
  EXPECT_TRUE(throws<DeviceError>([&] { from_buffer(v, {2}, kFloat32, kCUDA); }, "[from_buffer]"));
  Tensor c = zeros({2});
  EXPECT_TRUE(throws<DeviceError>([&] { c.cuda(); }, "[to] cannot move a tensor from cpu to cuda:0: " + reason));
  EXPECT_TRUE(throws<DeviceError>([&] { c.to(Device(kCUDA, 0), kFloat64); }, "[to] cannot move a tensor from cpu to cuda:0"));
  EXPECT_TRUE(throws<DeviceError>([&] { zeros_like(c, TensorOptions(kFloat32, kCUDA)); }, "[zeros] cannot create a tensor on cuda:0"));
}

// ---- IndexError -------------------------------------------------------------------------------

TEST_P(ErrorTest, IndexErrors) {
  Tensor a = zeros({2, 3}, dev());
  EXPECT_TRUE(throws<IndexError>([&] { a.select(0, 2); }, "[select] index 2 is out of range for dim 0 of size 2"));
  EXPECT_TRUE(throws<IndexError>([&] { a[-3]; }, "[select] index -3 is out of range"));
  EXPECT_TRUE(throws<IndexError>([&] { a.transpose(0, 2); }, "[transpose] dim 2 out of range for a 2-d tensor (expected -2..1)"));
  EXPECT_TRUE(throws<IndexError>([&] { a.unsqueeze(-4); }, "[unsqueeze] dim -4 out of range for a 2-d tensor (expected -3..2)"));
  EXPECT_TRUE(throws<IndexError>([&] { a.narrow(1, 2, 2); }, "[narrow] start 2 + length 2 exceeds dim 1 of size 3"));
  EXPECT_TRUE(throws<IndexError>([&] { a.permute({0, 0}); }, "[permute] dim 0 repeats in [0, 0]"));
  EXPECT_TRUE(throws<IndexError>([&] { a.size(2); }, "[size] dim 2 out of range"));
  EXPECT_TRUE(throws<IndexError>([&] { a.stride(-3); }, "[stride] dim -3 out of range"));
  EXPECT_TRUE(throws<IndexError>([&] { a.as_strided({4}, {2}); }, "[as_strided] sizes [4], strides [2] and offset 0 reach element 6"));
  // A 0-d tensor has no dims to read, index or transpose.
  Tensor s = full({}, 1.0, dev());
  EXPECT_TRUE(throws<IndexError>([&] { s.size(0); }, "[size] a 0-d tensor has no dims"));
  EXPECT_TRUE(throws<IndexError>([&] { s.stride(-1); }, "[stride] a 0-d tensor has no dims"));
  EXPECT_TRUE(throws<IndexError>([&] { s[0]; }, "[select] cannot index a 0-d tensor"));
  EXPECT_TRUE(throws<IndexError>([&] { s.transpose(0, 1); }, "[transpose] dim 1 out of range for a 0-d tensor"));
  EXPECT_TRUE(s.transpose(0, -1).is_same(s));
}

// ---- ValueError -------------------------------------------------------------------------------

TEST_P(ErrorTest, NegativeAndOverflowingSizes) {
  EXPECT_TRUE(throws<ValueError>([&] { zeros({-1}, dev()); }, "[zeros] negative size in shape [-1]"));
  EXPECT_TRUE(throws<ValueError>([&] { ones({2, -3}, dev()); }, "[ones] negative size in shape [2, -3]"));
  EXPECT_TRUE(throws<ValueError>([&] { empty({-2}, dev()); }, "[empty] negative size"));
  EXPECT_TRUE(throws<ValueError>([&] { full({-2}, 1.0, dev()); }, "[full] negative size"));
  const int64_t big = int64_t{1} << 62;
  EXPECT_TRUE(throws<ValueError>([&] { zeros({big, big}, dev()); }, "[zeros] shape [4611686018427387904, 4611686018427387904] has more than 2^63 elements"));
  EXPECT_TRUE(throws<ValueError>([&] { empty({big, 2}, dev()); }, "has more than 2^63 elements"));
  EXPECT_TRUE(throws<ValueError>([&] { empty({3, big, big, 0}, dev()); }, "has more than 2^63 elements"));
  // Fits in int64 elements but not in bytes.
  EXPECT_TRUE(throws<OutOfMemoryError>([&] { empty({int64_t{1} << 61, 2}, TensorOptions(kFloat64, dev())); }, "needs 36893488147419103232 bytes"));
  // A zero dim makes any other size fine.
  EXPECT_EQ(empty({0, big}, dev()).numel(), 0);
  EXPECT_TRUE(throws<ValueError>([&] { eye(-1); }, "[eye] n must be nonnegative, got -1"));
  EXPECT_TRUE(throws<ValueError>([&] { linspace(0, 1, -2); }, "[linspace] steps must be nonnegative, got -2"));
  EXPECT_TRUE(throws<ValueError>([&] { arange(0.0, 1e300, 1e-300); }, "[arange] the range from 0 to 1e+300 by 1e-300 has too many elements"));
}

TEST_P(ErrorTest, ValueErrors) {
  Tensor a = zeros({2, 3}, dev());
  EXPECT_TRUE(throws<ValueError>([&] { a.slice(1, 0, 3, 0); }, "[slice] step must be positive, got 0"));
  EXPECT_TRUE(throws<ValueError>([&] { a.item(); }, "[item] only one-element tensors have an item, but this one has shape [2, 3]"));
  EXPECT_TRUE(throws<ValueError>([&] { a.flatten(1, 0); }, "[flatten] start_dim 1 comes after end_dim 0"));
  EXPECT_TRUE(throws<ValueError>([&] { a.diagonal(0, 0, -2); }, "[diagonal] dim1 and dim2 must differ, both are 0"));
  EXPECT_TRUE(throws<ValueError>([&] { arange(0, 3, 0); }, "[arange] step must be nonzero"));
  EXPECT_TRUE(throws<ValueError>([&] { Device("tpu"); }, "[device] invalid device string 'tpu': expected 'cpu', 'cuda' or 'cuda:N'"));
  EXPECT_TRUE(throws<ValueError>([&] { gelu(a, "fast"); }, "[gelu]"));
  EXPECT_TRUE(throws<ValueError>([&] { clamp(a, std::nullopt, std::nullopt); }, "[clamp] at least one of min and max must be given"));
}

// ---- autograd misuse (Error) ------------------------------------------------------------------

TEST_P(ErrorTest, AutogradMisuse) {
  const TensorOptions f64(kFloat64, dev());
  Tensor plain = ones({2}, f64);
  EXPECT_TRUE(throws<Error>([&] { (plain * 2).backward(ones({2}, f64)); }, "[backward] tensor 0 does not require grad and has no grad_fn"));
  Tensor x = ones({2}, TensorOptions(kFloat64, dev(), true));
  // In place on a leaf that requires grad.
  EXPECT_TRUE(throws<Error>([&] { x.add_(1); }, "[add_] a leaf tensor that requires grad cannot be modified in place"));
  EXPECT_TRUE(throws<Error>([&] { x.fill_(0); }, "[fill_] a leaf tensor that requires grad"));
  EXPECT_TRUE(throws<Error>([&] { x.zero_(); }, "a leaf tensor that requires grad"));
  EXPECT_TRUE(throws<Error>([&] { x.copy_(plain); }, "[copy_] a leaf tensor that requires grad"));
  // requires_grad_ on a non-leaf.
  Tensor y = x * 2;
  EXPECT_TRUE(throws<Error>([&] { y.requires_grad_(false); }, "[requires_grad_] can only be changed on leaf tensors; this one was computed by 'mul'"));
  // Backward twice without retain_graph.
  Tensor z = x * x;
  z.backward(ones({2}, f64));
  EXPECT_TRUE(throws<Error>([&] { z.backward(ones({2}, f64)); }, "a second time"));
  // A tensor saved for backward and then modified in place.
  Tensor h = x * 1;
  Tensor w = h * h;  // saves h
  h.add_(1);
  EXPECT_TRUE(throws<Error>([&] { w.backward(ones({2}, f64)); }, "saved for backward was modified in place"));
  // An in-place op on a view of a tensor that requires grad.
  Tensor base = x * 1;
  EXPECT_TRUE(throws<Error>([&] { base.select(0, 0).mul_(2); }, "an in-place op on a view cannot be recorded"));
  // Gradients of inputs that do not take part.
  EXPECT_TRUE(throws<Error>([&] { autograd::grad({(x * 2).sum()}, {plain}); }, "[grad] input 0 does not require grad"));
  Tensor unused = ones({2}, TensorOptions(kFloat64, dev(), true));
  EXPECT_TRUE(throws<Error>([&] { autograd::grad({(x * 2).sum()}, {unused}); }, "[grad] input 0 was not used"));
  EXPECT_TRUE(throws<Error>([&] { plain.register_hook([](const Tensor& g) { return g; }); }, "[register_hook] the tensor does not require grad"));
  EXPECT_TRUE(throws<Error>([&] { plain.retain_grad(); }, "[retain_grad] the tensor does not require grad"));
  // Writes into expanded tensors.
  Tensor e = zeros({3}, dev()).expand({2, 3});
  EXPECT_TRUE(throws<Error>([&] { e.add_(1); }, "[add_] cannot write in place into an expanded tensor"));
}

TEST_P(ErrorTest, InPlaceOnTensorsThatRequireGradRecordsInsteadOfCrashing) {
  const TensorOptions f64(kFloat64, dev());
  Tensor x = make({1, 2}, {2}, dev()).requires_grad_();
  // fill_ / zero_ on a non-leaf: the old value gets a zero gradient, the result still requires grad.
  Tensor y = x * 3;
  y.fill_(5);
  EXPECT_TRUE(y.requires_grad());
  EXPECT_EQ(values(y), (std::vector<double>{5, 5}));
  EXPECT_EQ(y.grad_fn()->name(), "fill_");
  (y * x).backward(ones({2}, f64));
  EXPECT_EQ(values(x.grad()), (std::vector<double>{5, 5}));
  // copy_ of a constant into a tensor that requires grad.
  Tensor x2 = make({1, 2}, {2}, dev()).requires_grad_();
  Tensor z = x2 * 3;
  z.copy_(make({7, 8}, {2}, dev()));
  EXPECT_TRUE(z.requires_grad());
  EXPECT_EQ(values(z), (std::vector<double>{7, 8}));
  (z * x2).backward(ones({2}, f64));
  EXPECT_EQ(values(x2.grad()), (std::vector<double>{7, 8}));
  // copy_ of a leaf into a plain tensor of the same shape and dtype: the copy requires grad.
  Tensor src = make({1, 2}, {2}, dev()).requires_grad_();
  Tensor dst = zeros({2}, f64);
  dst.copy_(src);
  EXPECT_TRUE(dst.requires_grad());
  EXPECT_FALSE(dst.is_leaf());
  (dst * make({3, 4}, {2}, dev())).backward(ones({2}, f64));
  ASSERT_TRUE(src.grad().defined());
  EXPECT_EQ(values(src.grad()), (std::vector<double>{3, 4}));
}

// ---- undefined tensors ------------------------------------------------------------------------

TEST(UndefinedTensor, UseRaisesNamingTheCall) {
  Tensor u;
  EXPECT_FALSE(u.defined());
  EXPECT_FALSE(u.requires_grad());
  EXPECT_EQ(u.str(), "tensor(undefined)");
  EXPECT_TRUE(throws<Error>([&] { u.sizes(); }, "[sizes] called on an undefined tensor"));
  EXPECT_TRUE(throws<Error>([&] { u.dim(); }, "[dim] called on an undefined tensor"));
  EXPECT_TRUE(throws<Error>([&] { u.numel(); }, "[numel] called on an undefined tensor"));
  EXPECT_TRUE(throws<Error>([&] { u.dtype(); }, "[dtype] called on an undefined tensor"));
  EXPECT_TRUE(throws<Error>([&] { u.data_ptr(); }, "[data_ptr] called on an undefined tensor"));
  EXPECT_TRUE(throws<Error>([&] { u.requires_grad_(); }, "[requires_grad_] called on an undefined tensor"));
  EXPECT_TRUE(throws<Error>([&] { u.backward(); }, "[backward]"));
  Tensor a = zeros({2});
  EXPECT_TRUE(throws<ValueError>([&] { add(u, a); }, "[add] first operand is an undefined tensor"));
  EXPECT_TRUE(throws<ValueError>([&] { a * u; }, "[mul] second operand is an undefined tensor"));
  EXPECT_TRUE(throws<ValueError>([&] { exp(u); }, "[exp] input is an undefined tensor"));
  EXPECT_TRUE(throws<ValueError>([&] { u.view({2}); }, "[view] input is an undefined tensor"));
  EXPECT_TRUE(throws<ValueError>([&] { u.to(kFloat64); }, "[to] input is an undefined tensor"));
  EXPECT_TRUE(throws<ValueError>([&] { u.item(); }, "[item] input is an undefined tensor"));
  EXPECT_TRUE(throws<ValueError>([&] { u.clone(); }, "[clone] input is an undefined tensor"));
  EXPECT_TRUE(throws<ValueError>([&] { zeros_like(u); }, "[zeros_like] input is an undefined tensor"));
  EXPECT_TRUE(throws<ValueError>([&] { a.copy_(u); }, "[copy_] src is an undefined tensor"));
  EXPECT_TRUE(throws<ValueError>([&] { u.copy_(a); }, "[copy_] dst is an undefined tensor"));
  EXPECT_TRUE(throws<ValueError>([&] { u.fill_(1); }, "[fill_] input is an undefined tensor"));
}

}  // namespace
}  // namespace rtx::testing
