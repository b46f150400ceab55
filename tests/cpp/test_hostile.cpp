// Hostile input to the core: sizes whose byte counts, rounding or extents overflow, values that do not
// fit their dtype, integer division by zero, negative integer powers, out-of-range narrows and slices,
// and hooks that change a gradient's shape, dtype or device. Each is a typed error naming the problem.
#include <cstdint>
#include <limits>

#include "backend/cuda/caching_allocator.h"
#include "core/checked_size.h"
#include "core/scalar_range.h"
#include "test_utils.h"

namespace rtx::testing {
namespace {

class HostileTest : public DeviceTest {};
INSTANTIATE_DEVICE_TESTS(HostileTest);

constexpr int64_t kBig = (int64_t{1} << 62) - 1;  // float32 elements: 2^64 - 4 bytes

// ---- checked sizes -------------------------------------------------------------------------------

TEST(CheckedSize, BytesRoundingAndExtents) {
  EXPECT_EQ(rtx::detail::checked_nbytes({3, 5}, 4, "op"), 60u);
  EXPECT_EQ(rtx::detail::checked_nbytes({0, kBig}, 8, "op"), 0u);
  EXPECT_EQ(rtx::detail::checked_nbytes({int64_t{1} << 60}, 4, "op"), size_t{1} << 62);
  EXPECT_TRUE(throws<OutOfMemoryError>([] { rtx::detail::checked_nbytes({kBig}, 4, "op"); },
                                       "[op] out of memory: a tensor of shape [4611686018427387903] with 4-byte "
                                       "elements needs 18446744073709551612 bytes"));
  EXPECT_TRUE(throws<ValueError>([] { rtx::detail::checked_nbytes({int64_t{1} << 62, 4}, 1, "op"); },
                                 "[op] shape [4611686018427387904, 4] has more than 2^63 elements"));
  EXPECT_TRUE(throws<ValueError>([] { rtx::detail::checked_nbytes({-1}, 1, "op"); }, "[op] negative size"));

  EXPECT_EQ(rtx::detail::checked_round_up(65, 64, "cpu"), 128u);
  EXPECT_EQ(rtx::detail::checked_round_up(rtx::detail::kMaxAllocBytes - 63, 64, "cpu"), rtx::detail::kMaxAllocBytes - 63);
  EXPECT_TRUE(throws<OutOfMemoryError>([] { rtx::detail::checked_round_up(SIZE_MAX - 4, 64, "cpu"); },
                                       "[cpu] out of memory: 18446744073709551611 bytes asked for"));
  EXPECT_TRUE(throws<OutOfMemoryError>([] { rtx::detail::checked_round_up(rtx::detail::kMaxAllocBytes, 2, "cpu"); },
                                       "[cpu] out of memory"));

  EXPECT_EQ(rtx::detail::checked_extent({2, 3}, {3, 1}, 0, "op"), 6);
  EXPECT_EQ(rtx::detail::checked_extent({2, 3}, {3, 1}, 4, "op"), 10);
  EXPECT_EQ(rtx::detail::checked_extent({4, 0}, {int64_t{1} << 62, 1}, 0, "op"), 0);  // empty: reaches nothing
  EXPECT_EQ(rtx::detail::checked_extent({}, {}, 7, "op"), 8);
  EXPECT_TRUE(throws<ValueError>([] { rtx::detail::checked_extent({2, 2}, {int64_t{1} << 62, int64_t{1} << 62}, 0, "op"); },
                                 "[op] sizes [2, 2] with strides [4611686018427387904, 4611686018427387904] at "
                                 "storage offset 0 reach beyond"));
  EXPECT_TRUE(throws<ValueError>([] { rtx::detail::checked_extent({3}, {INT64_MAX}, 0, "op"); }, "reach beyond"));
}

TEST(CheckedSize, AllocatorsRefuseRequestsThatWouldWrap) {
  // The largest byte count a tensor may have, which the CPU allocator's 2 MiB rounding would overflow.
  EXPECT_TRUE(throws<OutOfMemoryError>([] { empty({INT64_MAX}, kUInt8); },
                                       "[cpu] out of memory: 9223372036854775807 bytes asked for"));
  // The CUDA caching allocator's size classes (its policy runs everywhere; see test_caching_allocator).
  EXPECT_EQ(cuda::CachingAllocator::round_size(1), cuda::CachingAllocator::round_size(512));
  EXPECT_TRUE(throws<OutOfMemoryError>([] { cuda::CachingAllocator::round_size(SIZE_MAX - 4); }, "[cuda] out of memory"));
  EXPECT_TRUE(throws<OutOfMemoryError>([] { cuda::CachingAllocator::segment_size(rtx::detail::kMaxAllocBytes - 511); },
                                       "[cuda] out of memory"));
}

TEST_P(HostileTest, ImpossibleTensorsRaiseOutOfMemoryNamingTheBytes) {
  const std::string bytes = "needs 18446744073709551612 bytes";
  EXPECT_TRUE(throws<OutOfMemoryError>([&] { zeros({kBig}, dev()); }, "[zeros] out of memory: a tensor of shape [4611686018427387903]"));
  EXPECT_TRUE(throws<OutOfMemoryError>([&] { ones({kBig}, dev()); }, bytes));
  EXPECT_TRUE(throws<OutOfMemoryError>([&] { full({kBig}, 2.0, dev()); }, bytes));
  EXPECT_TRUE(throws<OutOfMemoryError>([&] { empty({kBig}, dev()); }, bytes));
  EXPECT_TRUE(throws<OutOfMemoryError>([&] { randn({kBig}, dev()); }, bytes));
  EXPECT_TRUE(throws<OutOfMemoryError>([&] { zeros({1}, dev()).expand({kBig}).contiguous(); }, bytes));
  EXPECT_TRUE(throws<ValueError>([&] { zeros({1}, dev()).expand({int64_t{1} << 32, int64_t{1} << 32}); },
                                 "[expand] shape [4294967296, 4294967296] has more than 2^63 elements"));
  EXPECT_TRUE(throws<ValueError>([&] { zeros({0}, dev()).view({0, int64_t{1} << 62, int64_t{1} << 62}); },
                                 "[view] shape [0, 4611686018427387904, 4611686018427387904] has more than 2^63 "
                                 "elements when its zero sizes count as ones"));
}

TEST_P(HostileTest, GeometryThatOverflowsOrLeavesTheStorageIsRefused) {
  Tensor x = zeros({4}, dev());
  EXPECT_TRUE(throws<ValueError>([&] { x.as_strided({2, 2}, {int64_t{1} << 62, int64_t{1} << 62}); },
                                 "[as_strided] sizes [2, 2] with strides"));
  EXPECT_TRUE(throws<IndexError>([&] { x.as_strided({2}, {1}, int64_t{1} << 62); },
                                 "[as_strided] sizes [2], strides [1] and offset 4611686018427387904 reach element "
                                 "4611686018427387905, beyond the storage's 4 elements"));
  EXPECT_EQ(x.as_strided({kBig}, {0}).numel(), kBig);
  std::vector<float> memory(4);
  EXPECT_TRUE(throws<ValueError>([&] { from_blob(memory.data(), {3}, {INT64_MAX}, kFloat32, Device(kCPU)); },
                                 "[from_blob] sizes [3] with strides [9223372036854775807]"));
  EXPECT_TRUE(throws<OutOfMemoryError>(
      [&] { from_blob(memory.data(), {int64_t{1} << 62}, {1}, kFloat64, Device(kCPU)); }, "[from_blob] out of memory"));
  Tensor r = arange(5, TensorOptions(kInt64, dev()));
  EXPECT_TRUE(throws<IndexError>([&] { r.narrow(0, 1, INT64_MAX); }, "[narrow] start 1 + length 9223372036854775807"));
  EXPECT_TRUE(all_close(r.slice(0, 1, 5, int64_t{1} << 62), tensor<int64_t>({1})));
  EXPECT_TRUE(all_close(r.slice(0, std::nullopt, std::nullopt, INT64_MAX), tensor<int64_t>({0})));
  EXPECT_TRUE(throws<ShapeError>([&] { r.view({int64_t{1} << 32, int64_t{1} << 32, 5}); },
                                 "[view] shape [4294967296, 4294967296, 5] is invalid for input of size 5"));
}

TEST_P(HostileTest, IntegerArangeSpansTheWholeRange) {
  const TensorOptions o(kInt64, dev());
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(values(arange(lo, hi, int64_t{1} << 62, o)),
            (std::vector<double>{-9223372036854775808.0, -4611686018427387904.0, 0.0, 4611686018427387904.0}));
  EXPECT_EQ(arange(hi, lo, lo, o).tolist<int64_t>(), (std::vector<int64_t>{hi, -1}));
  EXPECT_TRUE(throws<ValueError>([&] { arange(lo, hi, 1, o); }, "[arange] the range from -9223372036854775808 to "
                                                                "9223372036854775807 by 1 has too many elements"));
}

// ---- values that do not fit their dtype ----------------------------------------------------------

TEST(ScalarRange, PyTorchsRuleForFillValues) {
  const auto fits = [](const Scalar& v, DType t) {
    try {
      rtx::detail::check_fits("op", v, t);
      return true;
    } catch (const ValueError&) {
      return false;
    }
  };
  // Integers: the dtype's range; unsigned dtypes also take negatives down to -max (they wrap).
  EXPECT_TRUE(fits(255, kUInt8) && fits(-255, kUInt8) && !fits(256, kUInt8) && !fits(-256, kUInt8));
  EXPECT_TRUE(fits(127, kInt8) && fits(-128, kInt8) && !fits(128, kInt8) && !fits(-129, kInt8));
  EXPECT_TRUE(fits(int64_t{2147483647}, kInt32) && !fits(int64_t{2147483648}, kInt32));
  EXPECT_TRUE(fits(std::numeric_limits<int64_t>::min(), kInt64) && fits(true, kUInt8) && fits(300, kBool));
  // Floats into integers: finite and in range (truncated).
  EXPECT_TRUE(fits(1.5, kUInt8) && fits(255.0, kUInt8) && !fits(-1.0, kUInt8) && !fits(255.5, kUInt8));
  EXPECT_TRUE(!fits(-128.5, kInt8) && fits(-128.0, kInt8) && !fits(NAN, kInt64) && !fits(INFINITY, kInt32));
  EXPECT_TRUE(fits(-9223372036854775808.0, kInt64) && !fits(9223372036854775808.0, kInt64));
  // Floats: finite values up to the largest finite one; inf and NaN pass.
  EXPECT_TRUE(fits(65504.0, kFloat16) && !fits(65505.0, kFloat16) && !fits(70000, kFloat16) && fits(INFINITY, kFloat16));
  EXPECT_TRUE(!fits(1e300, kFloat32) && fits(NAN, kFloat32) && fits(1e300, kFloat64) && !fits(1e39, kBFloat16));
}

TEST_P(HostileTest, FillValuesMustFitTheDtype) {
  EXPECT_TRUE(throws<ValueError>([&] { full({2}, 300, TensorOptions(kUInt8, dev())); },
                                 "[full] value 300 cannot be converted to uint8 without overflow"));
  EXPECT_TRUE(throws<ValueError>([&] { zeros({2}, TensorOptions(kInt8, dev())).fill_(-129); }, "[fill_] value -129"));
  EXPECT_TRUE(throws<ValueError>([&] { zeros({2}, dev()).fill_(1e300); }, "cannot be converted to float32"));
  EXPECT_TRUE(throws<ValueError>([&] { scalar_tensor(1e6, TensorOptions(kFloat16, dev())); }, "[scalar_tensor] value"));
  EXPECT_TRUE(throws<ValueError>([&] { full_like(zeros({2}, TensorOptions(kUInt8, dev())), 256); }, "[full] value 256"));
  EXPECT_EQ(values(full({2}, -1, TensorOptions(kUInt8, dev()))), (std::vector<double>{255, 255}));
  EXPECT_EQ(values(full({2}, 2.75, TensorOptions(kInt64, dev()))), (std::vector<double>{2, 2}));
  // Arithmetic with numbers wraps, as PyTorch's does: only the values written as fill are checked.
  EXPECT_EQ(values(zeros({1}, TensorOptions(kUInt8, dev())) + 300), (std::vector<double>{44}));
}

TEST_P(HostileTest, TensorsFromValuesRefuseValuesThatDoNotFit) {
  EXPECT_TRUE(throws<ValueError>([&] { tensor(std::vector<int64_t>{1, 300}, TensorOptions(kUInt8, dev())); },
                                 "[tensor] value 300 cannot be converted to uint8 without overflow"));
  EXPECT_TRUE(throws<ValueError>([&] { tensor({1.5, 1e10}, TensorOptions(kInt32, dev())); }, "[tensor] value"));
  EXPECT_TRUE(throws<ValueError>([&] { tensor(std::vector<float>{7e4f}, TensorOptions(kFloat16, dev())); },
                                 "cannot be converted to float16"));
  EXPECT_EQ(values(tensor(std::vector<int64_t>{-1, 255}, TensorOptions(kUInt8, dev()))), (std::vector<double>{255, 255}));
  EXPECT_EQ(values(tensor(std::vector<bool>{true, false}, TensorOptions(kInt8, dev()))), (std::vector<double>{1, 0}));
  EXPECT_EQ(tensor(std::vector<int32_t>{1, 2}).dtype(), kInt32);
}

// ---- integer division and powers -----------------------------------------------------------------

TEST_P(HostileTest, IntegerDivisionByZeroRaisesOnTheCpu) {
  const Tensor a = tensor<int64_t>({5, -7, 9}).to(dev()), b = tensor<int64_t>({1, 0, 2}).to(dev());
  if (dev().is_cpu()) {
    EXPECT_TRUE(throws<ValueError>([&] { floor_divide(a, b); },
                                   "[floor_divide] ZeroDivisionError: integer division by zero (the divisor of shape "
                                   "[3] and dtype int64 holds a zero)"));
    EXPECT_TRUE(throws<ValueError>([&] { remainder(a, 0); }, "[remainder] ZeroDivisionError"));
    EXPECT_TRUE(throws<ValueError>([&] { fmod(7, b); }, "[fmod] ZeroDivisionError"));
    Tensor c = a.clone();
    EXPECT_TRUE(throws<ValueError>([&] { floor_divide_(c, 0); }, "[floor_divide_] ZeroDivisionError"));
    EXPECT_EQ(values(c), values(a));  // refused before writing
  }
  // Nonzero divisors, float division and empty results divide as before.
  EXPECT_EQ(values(floor_divide(a, 2)), (std::vector<double>{2, -4, 4}));
  EXPECT_EQ(values(div(a, 0)), (std::vector<double>{INFINITY, -INFINITY, INFINITY}));
  EXPECT_EQ(floor_divide(empty({0}, TensorOptions(kInt64, dev())), 0).numel(), 0);
  EXPECT_EQ(floor_divide(empty({0, 1}, TensorOptions(kInt64, dev())), b).numel(), 0);
}

TEST_P(HostileTest, IntegerTensorToANegativeNumberPowerRaises) {
  Tensor a = tensor<int64_t>({2, 1, -1}).to(dev());
  EXPECT_TRUE(throws<ValueError>([&] { pow(a, -1); },
                                 "[pow] integers to negative integer powers are not allowed (a tensor of dtype int64 to "
                                 "the power -1)"));
  EXPECT_TRUE(throws<ValueError>([&] { pow_(a, -2); }, "[pow_] integers to negative integer powers"));
  EXPECT_EQ(values(pow(a, tensor<int64_t>({-1, -1, -1}).to(dev()))), (std::vector<double>{0, 1, -1}));
  EXPECT_EQ(values(pow(a, -1.0)), (std::vector<double>{0.5, 1, -1}));
}

// ---- hooks ---------------------------------------------------------------------------------------

TEST(HostileHooks, AHookMayChangeValuesOnly) {
  Tensor leaf = ones({3}, TensorOptions(kFloat32, Device(kCPU), true));
  leaf.register_hook([](const Tensor&) { return ones({5}); });
  EXPECT_TRUE(throws<ShapeError>([&] { leaf.sum().backward(); },
                                 "[register_hook] a hook on the gradient of a leaf tensor returned a tensor of shape "
                                 "[5] for a gradient of shape [3]"));
  Tensor x = ones({3}, TensorOptions(kFloat32, Device(kCPU), true));
  Tensor y = x * 2;
  y.register_hook([](const Tensor& g) { return g.to(kFloat64); });
  EXPECT_TRUE(throws<DTypeError>([&] { y.sum().backward(); },
                                 "output 0 of 'mul' returned a tensor of dtype float64 for a gradient of dtype float32"));
  Tensor z = ones({3}, TensorOptions(kFloat32, Device(kCPU), true));
  z.register_hook([](const Tensor& g) { return g * 3; });
  (z * 2).sum().backward();
  EXPECT_EQ(values(z.grad()), (std::vector<double>{6, 6, 6}));
}

}  // namespace
}  // namespace rtx::testing
