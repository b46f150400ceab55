// Tests of the random family: Philox4x32-10 against the Random123 known answers, the portable log and
// sincos, the exact element -> counter mapping of every op (recomputed here from the Philox words with
// libm and __int128), independence from layout and thread count, generator state replay, statistics
// on 1e6 samples, and every error path.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/common/philox.h"
#include "test_utils.h"

namespace rtx::testing {
namespace {

class RandomTest : public DeviceTest {};
INSTANTIATE_DEVICE_TESTS(RandomTest);

// ---- references computed from the raw Philox words ------------------------------------------------

uint32_t word(const GeneratorState& s, int64_t counter, int j) {
  return philox::block(s.seed, s.offset + static_cast<uint64_t>(counter)).w[j];
}
uint64_t word64(const GeneratorState& s, int64_t counter, int j) {
  return static_cast<uint64_t>(word(s, counter, 2 * j)) | (static_cast<uint64_t>(word(s, counter, 2 * j + 1)) << 32);
}
double u53(uint64_t r) { return std::ldexp(static_cast<double>(r >> 11), -53); }

// Value i of rand() with `digits` mantissa digits.
double ref_uniform(const GeneratorState& s, int64_t i, int digits) {
  if (digits > 24) return u53(word64(s, i / 2, static_cast<int>(i % 2)));
  return std::ldexp(static_cast<double>(word(s, i / 4, static_cast<int>(i % 4)) >> (32 - digits)), -digits);
}

// Value i of randn() in double (libm Box-Muller).
double ref_normal(const GeneratorState& s, int64_t i, bool is_double) {
  double u1, u2;
  int j;
  if (is_double) {
    u1 = 1.0 - u53(word64(s, i / 2, 0));
    u2 = u53(word64(s, i / 2, 1));
    j = static_cast<int>(i % 2);
  } else {
    const int pair = static_cast<int>(i % 4) / 2;
    u1 = std::ldexp(4294967296.0 - word(s, i / 4, 2 * pair), -32);
    u2 = std::ldexp(static_cast<double>(word(s, i / 4, 2 * pair + 1)), -32);
    j = static_cast<int>(i % 2);
  }
  const double rho = std::sqrt(-2.0 * std::log(u1));
  return j == 0 ? rho * std::cos(2 * M_PI * u2) : rho * std::sin(2 * M_PI * u2);
}

int64_t ref_randint(const GeneratorState& s, int64_t i, int64_t low, int64_t high) {
  const unsigned __int128 r = word64(s, i / 2, static_cast<int>(i % 2));
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  return static_cast<int64_t>(static_cast<uint64_t>(low) + static_cast<uint64_t>((r * range) >> 64));
}

// Runs make() after setting the state and returns its result and the state it leaves.
template <typename Make>
std::pair<Tensor, GeneratorState> at_state(const GeneratorState& s, const Make& make) {
  set_rng_state(s);
  Tensor t = make();
  return {t, get_rng_state()};
}

// Restores the thread count when a test ends.
class ThreadCount {
 public:
  ThreadCount() : saved_(get_num_threads()) {}
  ~ThreadCount() { set_num_threads(saved_); }

 private:
  int saved_;
};

// ---- Philox and the portable math --------------------------------------------------------------

TEST(Philox, KnownAnswers) {
  // Random123's kat_vectors for philox4x32_10 (counter words, key words -> output words).
  struct Kat {
    uint32_t ctr[4], key[2], out[4];
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
      {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
       {0xffffffffu, 0xffffffffu},
       {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
      {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
       {0xa4093822u, 0x299f31d0u},
       {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
  };
  for (const Kat& k : kats) {
    const philox::Block b =
        philox::philox4x32_10(philox::Block{{k.ctr[0], k.ctr[1], k.ctr[2], k.ctr[3]}}, k.key[0], k.key[1]);
    for (int j = 0; j < 4; ++j) EXPECT_EQ(b.w[j], k.out[j]) << "word " << j << " of counter " << std::hex << k.ctr[0];
  }
  // block() puts the 64-bit counter in words 0-1 and the seed in the key.
  const philox::Block b = philox::block(0xffffffffffffffffull, 0xffffffffffffffffull);
  const philox::Block r =
      philox::philox4x32_10(philox::Block{{0xffffffffu, 0xffffffffu, 0, 0}}, 0xffffffffu, 0xffffffffu);
  for (int j = 0; j < 4; ++j) EXPECT_EQ(b.w[j], r.w[j]);
}

TEST(Philox, PortableMath) {
  // log within about 1 ulp over (0, 1] and beyond (against long double libm).
  uint64_t state = 12345;
  for (int i = 0; i < 200000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const double x =
        i < 100000 ? philox::uniform53_open0(state) : std::ldexp(philox::uniform53_open0(state), (i % 200) - 100);
    const long double ref = std::log(static_cast<long double>(x));
    ASSERT_LE(std::fabs(philox::log_positive(x) - ref), 3e-16L * std::fabs(ref)) << "log(" << x << ")";
  }
  EXPECT_EQ(philox::log_positive(1.0), 0.0);
  EXPECT_NEAR(philox::log_positive(0x1p-53), -53 * std::log(2.0), 1e-14);
  // sin and cos of 2 pi t within about 1 ulp over [0, 1).
  for (int i = 0; i < 200000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const double t = i == 0 ? 0.0 : philox::uniform53(state);
    double s, c;
    philox::sincos_2pi(t, &s, &c);
    const long double angle = 2 * 3.141592653589793238462643383279502884L * t;
    ASSERT_LE(std::fabs(s - std::sin(angle)), 3e-16L) << "sin at " << t;
    ASSERT_LE(std::fabs(c - std::cos(angle)), 3e-16L) << "cos at " << t;
  }
  // mulhi64 against a 128-bit product.
  for (int i = 0; i < 10000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const uint64_t a = state, b = state * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(i);
    ASSERT_EQ(philox::mulhi64(a, b), static_cast<uint64_t>((static_cast<unsigned __int128>(a) * b) >> 64));
  }
  EXPECT_EQ(philox::mulhi64(~0ull, ~0ull), ~0ull - 1);
}

// ---- the element -> counter mapping ------------------------------------------------------------------

TEST_P(RandomTest, UniformMapping) {
  const GeneratorState s{0x0123456789abcdefull, 1000};
  const struct {
    DType dtype;
    int digits, per_counter;
  } cases[] = {{kFloat32, 24, 4}, {kFloat64, 53, 2}, {kFloat16, 11, 4}, {kBFloat16, 8, 4}};
  for (const auto& c : cases) {
    auto [t, after] = at_state(s, [&] { return rand({3, 7}, TensorOptions(c.dtype, dev())); });
    EXPECT_EQ(after.seed, s.seed);
    EXPECT_EQ(after.offset, s.offset + (21 + c.per_counter - 1) / c.per_counter) << c.dtype;
    const auto v = values(t);
    for (int64_t i = 0; i < 21; ++i) ASSERT_EQ(v[i], ref_uniform(s, i, c.digits)) << c.dtype << " element " << i;
    // uniform_ with bounds: fma(u, to - from, from) in double, rounded to the dtype.
    auto [u, after_u] = at_state(s, [&] {
      Tensor x = empty({21}, TensorOptions(c.dtype, dev()));
      return uniform_(x, -2.0, 3.0);
    });
    EXPECT_EQ(after_u.offset, after.offset);
    const auto vu = values(u);
    for (int64_t i = 0; i < 21; ++i) {
      const double expect = std::fma(ref_uniform(s, i, c.digits), 5.0, -2.0);
      if (c.dtype == kFloat64)
        ASSERT_EQ(vu[i], expect);
      else
        ASSERT_NEAR(vu[i], expect, std::fabs(expect) * default_rtol(c.dtype) * 2 + 1e-6) << c.dtype;
    }
  }
}

TEST_P(RandomTest, NormalMapping) {
  const GeneratorState s{42, 7};
  for (DType dtype : {kFloat32, kFloat64}) {
    const bool is_double = dtype == kFloat64;
    auto [t, after] = at_state(s, [&] { return randn({11}, TensorOptions(dtype, dev())); });
    EXPECT_EQ(after.offset, s.offset + (is_double ? 6u : 3u));
    const auto v = values(t);
    for (int64_t i = 0; i < 11; ++i) {
      const double ref = ref_normal(s, i, is_double);
      ASSERT_NEAR(v[i], ref, (is_double ? 1e-14 : 2e-7) * std::max(1.0, std::fabs(ref))) << dtype << " element " << i;
    }
    auto [n, after_n] = at_state(s, [&] {
      Tensor x = empty({11}, TensorOptions(dtype, dev()));
      return normal_(x, 3.0, 0.5);
    });
    EXPECT_EQ(after_n.offset, after.offset);
    const auto vn = values(n);
    for (int64_t i = 0; i < 11; ++i)
      ASSERT_NEAR(vn[i], 3.0 + 0.5 * ref_normal(s, i, is_double), is_double ? 1e-14 : 1e-6);
  }
  // 16-bit floats: the float32 values, rounded.
  for (DType dtype : {kFloat16, kBFloat16}) {
    set_rng_state(s);
    const auto v = values(randn({9}, TensorOptions(dtype, dev())));
    set_rng_state(s);
    const auto f = values(randn({9}, TensorOptions(kFloat32, dev())).to(dtype));
    EXPECT_EQ(v, f) << dtype;
  }
}

TEST_P(RandomTest, RandintMapping) {
  const GeneratorState s{99, 5};
  const int64_t lo = -(int64_t{1} << 62), hi = int64_t{1} << 62;
  for (auto [low, high] : {std::pair<int64_t, int64_t>{-3, 17}, {lo, hi}, {INT64_MIN, INT64_MAX}}) {
    auto [t, after] = at_state(s, [&, low = low, high = high] {
      return randint(low, high, {2, 5}, TensorOptions(kInt64, dev()));
    });
    EXPECT_EQ(after.offset, s.offset + 5);
    const auto v = t.tolist<int64_t>();
    for (int64_t i = 0; i < 10; ++i) ASSERT_EQ(v[i], ref_randint(s, i, low, high)) << low << " element " << i;
  }
  // Other dtypes get the same integers, converted.
  set_rng_state(s);
  const auto as_float = values(randint(-3, 17, {10}, TensorOptions(kFloat32, dev())));
  set_rng_state(s);
  const auto as_int8 = values(randint(-3, 17, {10}, TensorOptions(kInt8, dev())));
  for (int64_t i = 0; i < 10; ++i) {
    EXPECT_EQ(as_float[i], static_cast<double>(ref_randint(s, i, -3, 17)));
    EXPECT_EQ(as_int8[i], static_cast<double>(ref_randint(s, i, -3, 17)));
  }
}

TEST_P(RandomTest, BernoulliMapping) {
  const GeneratorState s{5, 0};
  const std::vector<double> p{0.0, 0.1, 0.5, 0.9, 1.0, 0.25, 0.75, 0.3, 0.6};
  auto [t, after] = at_state(s, [&] { return bernoulli(make(p, {3, 3}, dev(), kFloat64)); });
  EXPECT_EQ(t.dtype(), kFloat64);
  EXPECT_EQ(after.offset, 3u);
  const auto v = values(t);
  for (int64_t i = 0; i < 9; ++i) {
    const double u = std::ldexp(static_cast<double>(word(s, i / 4, static_cast<int>(i % 4))), -32);
    ASSERT_EQ(v[i], u < p[i] ? 1.0 : 0.0) << "element " << i;
  }
  // The scalar form follows the same mapping, into like's dtype.
  auto [b, after_b] = at_state(s, [&] { return bernoulli(empty({9}, TensorOptions(kInt32, dev())), 0.4); });
  EXPECT_EQ(b.dtype(), kInt32);
  EXPECT_EQ(after_b.offset, 3u);
  const auto vb = values(b);
  for (int64_t i = 0; i < 9; ++i)
    ASSERT_EQ(vb[i], std::ldexp(static_cast<double>(word(s, i / 4, static_cast<int>(i % 4))), -32) < 0.4 ? 1.0 : 0.0);
}

TEST_P(RandomTest, RandpermMapping) {
  const GeneratorState s{77, 3};
  const int64_t n = 37;
  auto [t, after] = at_state(s, [&] { return randperm(n, TensorOptions(kInt64, dev())); });
  EXPECT_EQ(after.offset, s.offset + 19);
  std::vector<int64_t> expect(n);
  std::iota(expect.begin(), expect.end(), 0);
  std::stable_sort(expect.begin(), expect.end(), [&](int64_t a, int64_t b) {
    return word64(s, a / 2, static_cast<int>(a % 2)) < word64(s, b / 2, static_cast<int>(b % 2));
  });
  EXPECT_EQ(t.tolist<int64_t>(), expect);
}

TEST_P(RandomTest, MultinomialMapping) {
  const GeneratorState s{2024, 11};
  const std::vector<double> w{1, 0, 3, 2, 5, 0.5, 0, 0, 4, 1};  // 2 rows of 5
  const Tensor weights = make(w, {2, 5}, dev(), kFloat32);
  // With replacement: sample (r, j) uses the float64 uniform of logical index r * 7 + j.
  auto [with, after_with] = at_state(s, [&] { return multinomial(weights, 7, true); });
  EXPECT_EQ(with.sizes(), (Shape{2, 7}));
  EXPECT_EQ(after_with.offset, s.offset + 7);
  const auto vw = with.tolist<int64_t>();
  for (int64_t r = 0; r < 2; ++r) {
    std::vector<double> cum(5);
    std::partial_sum(w.begin() + r * 5, w.begin() + r * 5 + 5, cum.begin());
    for (int64_t j = 0; j < 7; ++j) {
      const int64_t i = r * 7 + j;
      const double target = u53(word64(s, i / 2, static_cast<int>(i % 2))) * cum[4];
      const int64_t c = std::upper_bound(cum.begin(), cum.end(), target) - cum.begin();
      ASSERT_EQ(vw[i], c) << "row " << r << " sample " << j;
    }
  }
  // Without replacement: the largest keys log(u) / w of logical index r * 5 + c, in order.
  auto [without, after_without] = at_state(s, [&] { return multinomial(weights, 3, false); });
  EXPECT_EQ(after_without.offset, s.offset + 5);
  const auto vo = without.tolist<int64_t>();
  for (int64_t r = 0; r < 2; ++r) {
    std::vector<std::pair<double, int64_t>> keys;
    for (int64_t c = 0; c < 5; ++c) {
      const int64_t i = r * 5 + c;
      const double log_u = std::log(1.0 - u53(word64(s, i / 2, static_cast<int>(i % 2))));
      if (w[i] > 0) keys.push_back({-log_u / w[i], c});
    }
    std::sort(keys.begin(), keys.end());
    for (int64_t j = 0; j < 3; ++j) ASSERT_EQ(vo[r * 3 + j], keys[j].second) << "row " << r << " sample " << j;
  }
  // 1-d weights give a 1-d result, the same as the first row of a 2-d call.
  auto [one, after_one] = at_state(s, [&] { return multinomial(weights[0], 7, true); });
  EXPECT_EQ(one.sizes(), (Shape{7}));
  EXPECT_EQ(after_one.offset, s.offset + 4);
  EXPECT_EQ(one.tolist<int64_t>(), std::vector<int64_t>(vw.begin(), vw.begin() + 7));
}

// ---- reproducibility ----------------------------------------------------------------------------

// Every op once, in order, from a fixed seed, as float64 values.
std::vector<std::vector<double>> run_all_ops(Device dev, int64_t n) {
  manual_seed(123);
  std::vector<std::vector<double>> out;
  out.push_back(values(rand({n}, TensorOptions(kFloat32, dev))));
  out.push_back(values(rand({n}, TensorOptions(kFloat64, dev))));
  out.push_back(values(randn({n}, TensorOptions(kFloat32, dev))));
  out.push_back(values(randn({n}, TensorOptions(kFloat64, dev))));
  out.push_back(values(randn({n}, TensorOptions(kBFloat16, dev))));
  out.push_back(values(randint(-5, 1000, {n}, TensorOptions(kInt64, dev))));
  out.push_back(values(randperm(n, TensorOptions(kInt64, dev))));
  out.push_back(values(bernoulli(full({n}, 0.3, TensorOptions(kFloat32, dev)))));
  out.push_back(values(bernoulli(empty({n}, TensorOptions(kUInt8, dev)), 0.7)));
  Tensor w = rand({3, n / 3}, TensorOptions(kFloat64, dev));
  out.push_back(values(multinomial(w, 2 * n, true)));
  out.push_back(values(multinomial(w, n / 3, false)));
  out.push_back(values(multinomial(w[0], n, true)));
  Tensor x = empty({n / 3, 3}, TensorOptions(kFloat32, dev)).t();
  out.push_back(values(uniform_(x, -1, 1)));
  out.push_back(values(normal_(x, 2, 3)));
  return out;
}

TEST_P(RandomTest, SameSeedSameValuesAcrossCallsAndThreads) {
  ThreadCount restore;
  const int64_t n = 100003;  // several chunks per thread, boundaries mid-counter
  set_num_threads(2);
  const auto two = run_all_ops(dev(), n);
  const auto again = run_all_ops(dev(), n);
  set_num_threads(1);
  const auto one = run_all_ops(dev(), n);
  ASSERT_EQ(two.size(), one.size());
  for (size_t k = 0; k < two.size(); ++k) {
    EXPECT_EQ(two[k], again[k]) << "op " << k;
    EXPECT_EQ(two[k], one[k]) << "op " << k;
  }
}

TEST_P(RandomTest, DifferentSeedsDiffer) {
  manual_seed(1);
  const auto a = values(rand({64}, TensorOptions(kFloat32, dev())));
  manual_seed(2);
  const auto b = values(rand({64}, TensorOptions(kFloat32, dev())));
  int same = 0;
  for (size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
  EXPECT_LT(same, 3);
  // Consecutive calls continue the stream.
  manual_seed(1);
  const auto c = values(rand({64}, TensorOptions(kFloat32, dev())));
  const auto d = values(rand({64}, TensorOptions(kFloat32, dev())));
  EXPECT_EQ(a, c);
  EXPECT_NE(c, d);
}

TEST_P(RandomTest, GeneratorState) {
  manual_seed(31337);
  EXPECT_EQ(initial_seed(), 31337u);
  EXPECT_EQ(get_rng_state().offset, 0u);
  rand({10}, TensorOptions(kFloat32, dev()));  // 3 counters
  const GeneratorState saved = get_rng_state();
  EXPECT_EQ(saved.seed, 31337u);
  EXPECT_EQ(saved.offset, 3u);
  const auto a = values(randn({5, 5}, TensorOptions(kFloat64, dev())));
  const auto b = values(randint(0, 100, {17}, TensorOptions(kInt32, dev())));
  set_rng_state(saved);
  EXPECT_EQ(values(randn({5, 5}, TensorOptions(kFloat64, dev()))), a);
  EXPECT_EQ(values(randint(0, 100, {17}, TensorOptions(kInt32, dev()))), b);
  // Empty outputs take no counters; a 0-d output takes one.
  const GeneratorState before = get_rng_state();
  EXPECT_EQ(rand({0, 4}, TensorOptions(kFloat32, dev())).numel(), 0);
  EXPECT_EQ(randperm(0, TensorOptions(kInt64, dev())).numel(), 0);
  EXPECT_EQ(get_rng_state().offset, before.offset);
  const Tensor scalar = rand({}, TensorOptions(kFloat32, dev()));
  EXPECT_EQ(scalar.dim(), 0);
  EXPECT_EQ(get_rng_state().offset, before.offset + 1);
  // manual_seed restarts the stream.
  manual_seed(31337);
  EXPECT_EQ(get_rng_state().offset, 0u);
}

TEST_P(RandomTest, GeneratorHandlesAndGuards) {
  const TensorOptions f32(kFloat32, dev());
  manual_seed(99);
  const auto first = values(rand({7}, f32));
  const auto second = values(rand({7}, f32));
  // A generator seeded like the default one draws the same values, and leaves the default alone.
  manual_seed(99);
  Generator g;
  EXPECT_EQ(g.manual_seed(99).initial_seed(), 99u);
  {
    GeneratorGuard guard(g);
    EXPECT_EQ(values(rand({7}, f32)), first);
  }
  EXPECT_EQ(g.get_state().offset, 2u);
  EXPECT_EQ(get_rng_state().offset, 0u);
  EXPECT_EQ(values(rand({7}, f32)), first);
  {
    GeneratorGuard guard(g);
    EXPECT_EQ(values(rand({7}, f32)), second);
    // Guards nest, and the innermost one is current.
    Generator other;
    other.manual_seed(99);
    {
      GeneratorGuard inner(other);
      EXPECT_EQ(values(rand({7}, f32)), first);
    }
    EXPECT_EQ(g.get_state().offset, 4u);
  }
  // Copies share a state; default_generator() is the one manual_seed sets.
  Generator copy = g;
  EXPECT_TRUE(copy.is_same(g));
  copy.manual_seed(5);
  EXPECT_EQ(g.initial_seed(), 5u);
  EXPECT_FALSE(Generator().is_same(g));
  manual_seed(1234);
  EXPECT_EQ(default_generator().initial_seed(), 1234u);
  EXPECT_TRUE(default_generator().is_same(default_generator()));
  default_generator().set_state({77, 3});
  EXPECT_EQ(get_rng_state().seed, 77u);
  EXPECT_EQ(get_rng_state().offset, 3u);
  const uint64_t seed = g.seed();
  EXPECT_EQ(g.initial_seed(), seed);
  EXPECT_EQ(g.get_state().offset, 0u);
  EXPECT_EQ(Generator(Device(kCUDA, 1)).device(), Device(kCUDA, 1));
  // Every random op draws from the current generator.
  Generator h;
  h.manual_seed(8);
  GeneratorGuard guard(h);
  const GeneratorState before = get_rng_state();
  Tensor x = empty({4}, f32);
  rand({3}, f32);
  randn({3}, f32);
  randint(0, 5, {3}, TensorOptions(kInt64, dev()));
  randperm(4, TensorOptions(kInt64, dev()));
  uniform_(x);
  normal_(x);
  bernoulli(full({3}, 0.5, f32));
  bernoulli(x, 0.5);
  multinomial(full({3}, 1.0, f32), 2);
  EXPECT_EQ(get_rng_state().offset, before.offset);
  EXPECT_GT(h.get_state().offset, 0u);
}

TEST_P(RandomTest, LayoutIndependence) {
  // uniform_/normal_ into a transposed or sliced view give the values of the logical index.
  for (DType dtype : {kFloat32, kFloat64, kFloat16}) {
    const GeneratorState s{8, 8};
    auto [contiguous, a1] = at_state(s, [&] { return rand({7, 5}, TensorOptions(dtype, dev())); });
    auto [transposed, a2] = at_state(s, [&] {
      Tensor base = zeros({5, 7}, TensorOptions(dtype, dev()));
      Tensor view = base.t();
      uniform_(view, 0.0, 1.0);
      return base.t();
    });
    EXPECT_FALSE(transposed.is_contiguous());
    EXPECT_EQ(values(transposed), values(contiguous)) << dtype;
    auto [normal, a3] = at_state(s, [&] { return randn({3, 4}, TensorOptions(dtype, dev())); });
    auto [strided, a4] = at_state(s, [&] {
      Tensor base = full({6, 4}, 99.0, TensorOptions(dtype, dev()));
      Tensor view = base.slice(0, 0, 6, 2);
      normal_(view);
      return base;
    });
    const auto vs = values(strided), vn = values(normal);
    for (int64_t r = 0; r < 6; ++r)
      for (int64_t c = 0; c < 4; ++c) ASSERT_EQ(vs[r * 4 + c], r % 2 ? 99.0 : vn[r / 2 * 4 + c]) << dtype;
    EXPECT_EQ(a1.offset, a2.offset);
    EXPECT_EQ(a3.offset, a4.offset);
  }
}

TEST_P(RandomTest, AutogradFlags) {
  const Tensor r = rand({3}, TensorOptions(kFloat64, dev(), true));
  EXPECT_TRUE(r.requires_grad());
  EXPECT_TRUE(r.is_leaf());
  EXPECT_TRUE(randn({3}, TensorOptions(kFloat32, dev(), true)).requires_grad());
  EXPECT_FALSE(rand({3}, TensorOptions(kFloat32, dev())).requires_grad());
  // bernoulli is not differentiable.
  EXPECT_FALSE(bernoulli(full({3}, 0.5, TensorOptions(kFloat64, dev(), true))).requires_grad());
  // In place on a non-leaf: new values, and no gradient flows to the old ones.
  const Tensor a = ones({4}, TensorOptions(kFloat64, dev())).requires_grad_();
  Tensor x = a * 2.0;
  uniform_(x, 5.0, 6.0);
  for (double v : values(x)) EXPECT_TRUE(v >= 5.0 && v < 6.0);
  Tensor y = x * 3.0;
  y.backward(ones_like(y));
  EXPECT_EQ(values(a.grad()), std::vector<double>(4, 0.0));
  Tensor z = a * 2.0;
  normal_(z);
  EXPECT_TRUE(z.requires_grad());
}

// ---- statistics -----------------------------------------------------------------------------------

struct Moments {
  double mean = 0, var = 0, min = INFINITY, max = -INFINITY;
};
Moments moments(const std::vector<double>& v) {
  Moments m;
  for (double x : v) {
    m.mean += x;
    m.min = std::min(m.min, x);
    m.max = std::max(m.max, x);
  }
  m.mean /= static_cast<double>(v.size());
  for (double x : v) m.var += (x - m.mean) * (x - m.mean);
  m.var /= static_cast<double>(v.size() - 1);
  return m;
}

TEST_P(RandomTest, UniformStatistics) {
  manual_seed(2);
  const int64_t n = 1000000;
  for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    const Moments m = moments(values(rand({n}, TensorOptions(dtype, dev()))));
    const double tol = dtype == kBFloat16 ? 0.004 : 0.002;  // bfloat16 values are multiples of 2^-8
    EXPECT_NEAR(m.mean, 0.5, tol) << dtype;
    EXPECT_NEAR(m.var, 1.0 / 12, 0.002) << dtype;
    EXPECT_GE(m.min, 0.0) << dtype;
    EXPECT_LT(m.max, 1.0) << dtype;
    EXPECT_GT(m.max, 0.99) << dtype;
  }
  Tensor t = empty({n}, TensorOptions(kFloat32, dev()));
  const Moments m = moments(values(uniform_(t, -3.0, 5.0)));
  EXPECT_NEAR(m.mean, 1.0, 0.02);
  EXPECT_NEAR(m.var, 64.0 / 12, 0.03);
  EXPECT_GE(m.min, -3.0);
  EXPECT_LT(m.max, 5.0);
  // from == to is allowed.
  Tensor same = empty({5}, TensorOptions(kFloat64, dev()));
  EXPECT_EQ(values(uniform_(same, 2.5, 2.5)), std::vector<double>(5, 2.5));
}

TEST_P(RandomTest, NormalStatistics) {
  manual_seed(3);
  const int64_t n = 1000000;
  for (DType dtype : {kFloat32, kFloat64}) {
    const auto v = values(randn({n}, TensorOptions(dtype, dev())));
    const Moments m = moments(v);
    EXPECT_NEAR(m.mean, 0.0, 0.005) << dtype;
    EXPECT_NEAR(m.var, 1.0, 0.005) << dtype;
    EXPECT_GT(m.max, 4.0) << dtype;
    EXPECT_LT(m.max, 6.5) << dtype;
    EXPECT_LT(m.min, -4.0) << dtype;
    // Tails: P(|z| > 1) = 0.3173, P(|z| > 2) = 0.0455, P(|z| > 3) = 0.0027.
    double beyond1 = 0, beyond2 = 0, beyond3 = 0, skew = 0;
    for (double x : v) {
      beyond1 += std::fabs(x) > 1;
      beyond2 += std::fabs(x) > 2;
      beyond3 += std::fabs(x) > 3;
      skew += x * x * x;
    }
    EXPECT_NEAR(beyond1 / n, 0.3173, 0.002) << dtype;
    EXPECT_NEAR(beyond2 / n, 0.0455, 0.001) << dtype;
    EXPECT_NEAR(beyond3 / n, 0.0027, 0.0003) << dtype;
    EXPECT_NEAR(skew / n, 0.0, 0.02) << dtype;
  }
  Tensor t = empty({n}, TensorOptions(kFloat64, dev()));
  const Moments m = moments(values(normal_(t, -2.0, 0.5)));
  EXPECT_NEAR(m.mean, -2.0, 0.003);
  EXPECT_NEAR(m.var, 0.25, 0.002);
  Tensor zero_std = empty({4}, TensorOptions(kFloat32, dev()));
  EXPECT_EQ(values(normal_(zero_std, 1.5, 0.0)), std::vector<double>(4, 1.5));
}

TEST_P(RandomTest, RandintStatistics) {
  manual_seed(4);
  const int64_t n = 1000000;
  const auto v = values(randint(-3, 7, {n}, TensorOptions(kInt64, dev())));
  std::vector<double> counts(10);
  for (double x : v) {
    ASSERT_TRUE(x >= -3 && x < 7 && x == std::floor(x)) << x;
    counts[static_cast<size_t>(x + 3)] += 1;
  }
  double chi2 = 0;
  for (double c : counts) chi2 += (c - n / 10.0) * (c - n / 10.0) / (n / 10.0);
  EXPECT_LT(chi2, 40.0);  // 9 degrees of freedom: P(chi2 > 40) ~ 1e-5
  EXPECT_GT(chi2, 0.1);   // not suspiciously flat
  // A huge range: inside, and spread over it.
  const auto big = randint(INT64_MIN, INT64_MAX, {10000}, TensorOptions(kInt64, dev())).tolist<int64_t>();
  int64_t negative = 0;
  for (int64_t x : big) negative += x < 0;
  EXPECT_NEAR(negative / 10000.0, 0.5, 0.03);
  // Small dtypes use their full range.
  const auto bytes = values(randint(0, 256, {100000}, TensorOptions(kUInt8, dev())));
  const Moments mb = moments(bytes);
  EXPECT_EQ(mb.min, 0.0);
  EXPECT_EQ(mb.max, 255.0);
  const auto bools = values(randint(0, 2, {1000}, TensorOptions(kBool, dev())));
  EXPECT_NEAR(moments(bools).mean, 0.5, 0.08);
}

TEST_P(RandomTest, BernoulliStatistics) {
  manual_seed(5);
  const int64_t n = 1000000;
  for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    const Moments m = moments(values(bernoulli(full({n}, 0.3, TensorOptions(dtype, dev())))));
    EXPECT_NEAR(m.mean, 0.3, 0.003) << dtype;  // bfloat16 rounds 0.3 to 0.30078
  }
  const Moments ms = moments(values(bernoulli(empty({n}, TensorOptions(kBool, dev())), 0.85)));
  EXPECT_NEAR(ms.mean, 0.85, 0.002);
  // p = 0 and p = 1 are certain; a transposed p is read by logical index.
  const Tensor p = make({0, 1, 0, 1, 1, 0}, {2, 3}, dev(), kFloat32).t();
  EXPECT_EQ(values(bernoulli(p)), values(p));
  EXPECT_EQ(bernoulli(p).sizes(), (Shape{3, 2}));
  EXPECT_EQ(values(bernoulli(empty({5}, TensorOptions(kInt64, dev())), 1.0)), std::vector<double>(5, 1.0));
  EXPECT_EQ(values(bernoulli(empty({5}, TensorOptions(kInt64, dev())), 0.0)), std::vector<double>(5, 0.0));
}

TEST_P(RandomTest, RandpermIsPermutation) {
  manual_seed(6);
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{1000}, int64_t{100000}}) {
    for (DType dtype : {kInt64, kInt32, kFloat32}) {
      auto v = values(randperm(n, TensorOptions(dtype, dev())));
      ASSERT_EQ(static_cast<int64_t>(v.size()), n);
      const auto shuffled = v;
      std::sort(v.begin(), v.end());
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(v[i], static_cast<double>(i)) << n << " " << dtype;
      if (n >= 1000) {
        int64_t fixed = 0;
        for (int64_t i = 0; i < n; ++i) fixed += shuffled[i] == static_cast<double>(i);
        EXPECT_LT(fixed, 10) << "expected about one fixed point";
      }
    }
  }
  // Position of element 0 is uniform.
  std::vector<double> where(4);
  for (int rep = 0; rep < 4000; ++rep) {
    const auto p = randperm(4, TensorOptions(kInt64, dev())).tolist<int64_t>();
    where[std::find(p.begin(), p.end(), 0) - p.begin()] += 1;
  }
  for (double c : where) EXPECT_NEAR(c / 4000, 0.25, 0.03);
}

TEST_P(RandomTest, MultinomialStatistics) {
  manual_seed(7);
  const std::vector<double> w{1, 2, 0, 3, 4};
  const Tensor weights = make(w, {5}, dev(), kFloat32);
  const int64_t n = 1000000;
  const auto v = multinomial(weights, n, true).tolist<int64_t>();
  std::vector<double> freq(5);
  for (int64_t c : v) freq[c] += 1.0 / n;
  for (int64_t c = 0; c < 5; ++c) EXPECT_NEAR(freq[c], w[c] / 10.0, 0.002) << "category " << c;
  EXPECT_EQ(freq[2], 0.0);
  // Without replacement: distinct, never a zero weight, and the first draw follows the weights.
  const std::vector<double> w2{5, 1, 0, 1, 1};
  const int64_t reps = 4000;
  const Tensor rows = make({1, 2, 0, 3, 4, 5, 1, 0, 1, 1}, {2, 5}, dev(), kFloat64)
                          .expand({reps, 2, 5})
                          .reshape({2 * reps, 5});
  const auto picks = multinomial(rows, 4, false).tolist<int64_t>();
  std::vector<double> first(5), first2(5);
  for (int64_t r = 0; r < 2 * reps; ++r) {
    std::vector<int64_t> row(picks.begin() + r * 4, picks.begin() + r * 4 + 4);
    (r % 2 ? first2 : first)[row[0]] += 1.0 / reps;
    std::sort(row.begin(), row.end());
    ASSERT_EQ(row, (std::vector<int64_t>{0, 1, 3, 4})) << "row " << r;
  }
  for (int64_t c = 0; c < 5; ++c) {
    EXPECT_NEAR(first[c], w[c] / 10.0, 0.035) << "category " << c;
    EXPECT_NEAR(first2[c], w2[c] / 8.0, 0.035) << "category " << c;
  }
}

// ---- errors ---------------------------------------------------------------------------------------

TEST_P(RandomTest, Errors) {
  const TensorOptions f32(kFloat32, dev());
  EXPECT_TRUE(throws<DTypeError>([&] { rand({2}, TensorOptions(kInt64, dev())); }, "[rand] expected a floating dtype"));
  EXPECT_TRUE(
      throws<DTypeError>([&] { randn({2}, TensorOptions(kInt32, dev())); }, "[randn] expected a floating dtype"));
  EXPECT_TRUE(throws<ValueError>([&] { rand({2, -1}, f32); }, "[rand] negative size"));
  EXPECT_TRUE(throws<ValueError>([&] { randn({-3}, f32); }, "[randn] negative size"));
  EXPECT_TRUE(throws<ValueError>([&] { randint(0, 5, {-1}); }, "[randint] negative size"));
  EXPECT_TRUE(throws<ValueError>([&] { randint(5, 5, {2}); }, "[randint] expected low < high"));
  EXPECT_TRUE(
      throws<ValueError>([&] { randint(0, 300, {2}, TensorOptions(kUInt8, dev())); }, "does not fit dtype uint8"));
  EXPECT_TRUE(
      throws<ValueError>([&] { randint(-1, 3, {2}, TensorOptions(kUInt8, dev())); }, "does not fit dtype uint8"));
  EXPECT_TRUE(throws<ValueError>([&] { randint(0, 3, {2}, TensorOptions(kBool, dev())); }, "does not fit dtype bool"));
  EXPECT_TRUE(throws<ValueError>([&] { randint(0, 5000, {2}, TensorOptions(kFloat16, dev())); },
                                 "does not fit dtype float16, which holds the integers of [-2048, 2049) exactly"));
  // The extreme ranges a dtype holds are accepted.
  EXPECT_EQ(randint(-128, 128, {4}, TensorOptions(kInt8, dev())).numel(), 4);
  EXPECT_EQ(randint(-2048, 2049, {4}, TensorOptions(kFloat16, dev())).numel(), 4);
  EXPECT_EQ(randperm(2049, TensorOptions(kFloat16, dev())).numel(), 2049);
  EXPECT_TRUE(throws<ValueError>([&] { randperm(-1); }, "[randperm] n must be nonnegative"));
  EXPECT_TRUE(throws<DTypeError>([&] { randperm(3, TensorOptions(kBool, dev())); }, "[randperm] bool"));
  EXPECT_TRUE(
      throws<ValueError>([&] { randperm(300, TensorOptions(kInt8, dev())); }, "[randperm] n = 300 is too large"));
  EXPECT_TRUE(
      throws<ValueError>([&] { randperm(3000, TensorOptions(kFloat16, dev())); }, "too large for dtype float16"));

  Tensor t = empty({3}, f32);
  Tensor ints = zeros({3}, TensorOptions(kInt64, dev()));
  EXPECT_TRUE(throws<ValueError>([&] { uniform_(t, 2.0, 1.0); }, "[uniform_] expected from <= to"));
  EXPECT_TRUE(throws<ValueError>([&] { uniform_(t, 0.0, INFINITY); }, "[uniform_] from and to must be finite"));
  EXPECT_TRUE(throws<ValueError>([&] { uniform_(t, -1e308, 1e308); }, "[uniform_] the range"));
  EXPECT_TRUE(throws<DTypeError>([&] { uniform_(ints); }, "[uniform_] expected a floating tensor"));
  EXPECT_TRUE(throws<ValueError>([&] { normal_(t, 0.0, -1.0); }, "[normal_] expected std >= 0"));
  EXPECT_TRUE(throws<ValueError>([&] { normal_(t, 0.0, NAN); }, "[normal_] expected std >= 0"));
  EXPECT_TRUE(throws<DTypeError>([&] { normal_(ints); }, "[normal_] expected a floating tensor"));
  Tensor undefined;
  EXPECT_TRUE(throws<ValueError>([&] { uniform_(undefined); }, "[uniform_] input is an undefined tensor"));
  Tensor leaf = zeros({3}, TensorOptions(kFloat64, dev(), true));
  EXPECT_TRUE(throws<Error>([&] { uniform_(leaf); }, "[uniform_] a leaf tensor that requires grad"));
  EXPECT_TRUE(throws<Error>([&] { normal_(leaf); }, "[normal_] a leaf tensor that requires grad"));
  Tensor expanded = zeros({1}, f32).expand({4});
  EXPECT_TRUE(throws<Error>([&] { uniform_(expanded); }, "[uniform_] cannot write in place into an expanded tensor"));

  // Float64 tensors of the given shape.
  auto f64 = [&](const std::vector<double>& v, const Shape& shape) { return make(v, shape, dev()); };
  EXPECT_TRUE(throws<DTypeError>([&] { bernoulli(ints); }, "[bernoulli] p must be a floating tensor"));
  EXPECT_TRUE(throws<ValueError>([&] { bernoulli(f64({0.5, 1.5}, {2})); }, "element 1 (flat) of p (shape [2]) is 1.5"));
  EXPECT_TRUE(throws<ValueError>([&] { bernoulli(f64({-0.1}, {1})); }, "[bernoulli] p must hold probabilities"));
  EXPECT_TRUE(throws<ValueError>([&] { bernoulli(f64({NAN}, {1})); }, "[bernoulli] p must hold probabilities"));
  EXPECT_TRUE(throws<ValueError>([&] { bernoulli(t, 1.5); }, "[bernoulli] p must be a probability in [0, 1], but got"));
  EXPECT_TRUE(throws<ValueError>([&] { bernoulli(t, NAN); }, "[bernoulli] p must be a probability"));
  EXPECT_TRUE(throws<ValueError>([&] { bernoulli(undefined); }, "[bernoulli] p is an undefined tensor"));

  const Tensor w = f64({1, 2, 3}, {3});
  EXPECT_TRUE(throws<ValueError>([&] { multinomial(f64({1, -1, 3}, {3}), 1); }, "row 0 has -1 at category 1"));
  EXPECT_TRUE(throws<ValueError>([&] { multinomial(f64({1, INFINITY}, {2}), 1); }, "must be finite and nonnegative"));
  EXPECT_TRUE(throws<ValueError>([&] { multinomial(f64({NAN, 1}, {2}), 1, true); }, "must be finite and nonnegative"));
  EXPECT_TRUE(throws<ValueError>([&] { multinomial(f64({1, 1, 0, 0}, {2, 2}), 1, true); }, "row 1 of the weights is"));
  EXPECT_TRUE(throws<ValueError>([&] { multinomial(w, 4); }, "cannot draw 4 samples without replacement from 3"));
  EXPECT_TRUE(throws<ValueError>([&] { multinomial(f64({1, 0, 3}, {3}), 3); }, "row 0 has 2 categories of positive"));
  EXPECT_TRUE(throws<ValueError>([&] { multinomial(w, 0, true); }, "[multinomial] num_samples must be positive"));
  EXPECT_TRUE(throws<ValueError>([&] { multinomial(w, -2); }, "[multinomial] num_samples must be positive"));
  const Tensor no_categories = zeros({2, 0}, TensorOptions(kFloat64, dev()));
  EXPECT_TRUE(throws<ValueError>([&] { multinomial(no_categories, 1, true); }, "have no categories"));
  EXPECT_TRUE(throws<ShapeError>([&] { multinomial(zeros({1, 2, 3}, f32), 1); }, "[multinomial] weights must be 1-d"));
  EXPECT_TRUE(throws<ShapeError>([&] { multinomial(zeros({}, f32), 1); }, "[multinomial] weights must be 1-d or 2-d"));
  EXPECT_TRUE(throws<DTypeError>([&] { multinomial(ones({3}, TensorOptions(kInt64, dev())), 1); },
                                 "[multinomial] weights must be floating"));
  // A failed call takes no counters.
  const GeneratorState before = get_rng_state();
  EXPECT_TRUE(throws<ValueError>([&] { multinomial(w, 4); }, "without replacement"));
  EXPECT_EQ(get_rng_state().offset, before.offset);
}


// ---- CUDA against the CPU ---------------------------------------------------------------------------

// make(device) on dev and on the CPU from the same generator state: the same values, bit for bit,
// and the same state after.
template <typename Make>
::testing::AssertionResult same_as_cpu(Device dev, const GeneratorState& s, const Make& make) {
  auto [cpu, cpu_after] = at_state(s, [&] { return make(Device(kCPU)); });
  auto [got, got_after] = at_state(s, [&] { return make(dev); });
  if (got_after.offset != cpu_after.offset)
    return ::testing::AssertionFailure() << "offset " << got_after.offset << " != " << cpu_after.offset;
  return same_bytes(got, cpu);
}

TEST_P(RandomTest, CudaMatchesCpuBitwise) {
  if (dev().is_cpu()) GTEST_SKIP() << "compares the CUDA kernels against the CPU's";
  const GeneratorState s{0x9e3779b97f4a7c15ull, 12345};
  const Shape odd{37, 29};  // a partial last counter
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    EXPECT_TRUE(same_as_cpu(dev(), s, [&](Device d) { return rand(odd, TensorOptions(dt, d)); })) << dt;
    EXPECT_TRUE(same_as_cpu(dev(), s, [&](Device d) { return randn(odd, TensorOptions(dt, d)); })) << dt;
    EXPECT_TRUE(same_as_cpu(dev(), s, [&](Device d) { return rand({(1 << 20) + 3}, TensorOptions(dt, d)); })) << dt;
    EXPECT_TRUE(same_as_cpu(dev(), s, [&](Device d) { return randn({(1 << 20) + 1}, TensorOptions(dt, d)); })) << dt;
    // In place into contiguous, transposed and sliced outputs (values by logical index).
    for (int layout = 0; layout < 3; ++layout) {
      auto target = [&](Device d) {
        Tensor base = full({29, 74}, 7.0, TensorOptions(dt, d));
        return layout == 0 ? base : layout == 1 ? base.t() : base.slice(1, 1, 74, 2);
      };
      EXPECT_TRUE(same_as_cpu(dev(), s, [&](Device d) {
        Tensor t = target(d);
        return uniform_(t, -3.0, 0.5);
      })) << dt << " layout " << layout;
      EXPECT_TRUE(same_as_cpu(dev(), s, [&](Device d) {
        Tensor t = target(d);
        return normal_(t, 1.5, 2.0);
      })) << dt << " layout " << layout;
    }
  }
  struct IntCase {
    DType dtype;
    int64_t low, high;
  };
  for (const IntCase& c : {IntCase{kInt64, INT64_MIN, INT64_MAX}, IntCase{kInt64, -3, 17}, IntCase{kInt32, -100000, 5},
                           IntCase{kInt8, -128, 128}, IntCase{kUInt8, 0, 256}, IntCase{kBool, 0, 2},
                           IntCase{kFloat32, -1000, 1000}, IntCase{kFloat16, -2048, 2049}, IntCase{kBFloat16, 0, 257},
                           IntCase{kFloat64, -(int64_t{1} << 53), int64_t{1} << 53}}) {
    EXPECT_TRUE(same_as_cpu(dev(), s, [&](Device d) { return randint(c.low, c.high, odd, TensorOptions(c.dtype, d)); }))
        << c.dtype << " [" << c.low << ", " << c.high << ")";
  }
  const Tensor probs = rand({29, 37}, TensorOptions(kFloat64));
  for (DType dt : {kFloat32, kFloat64, kFloat16}) {
    EXPECT_TRUE(same_as_cpu(dev(), s, [&](Device d) { return bernoulli(probs.to(d, dt).t()); })) << dt;
  }
  for (DType dt : {kBool, kUInt8, kInt32, kInt64, kFloat32, kFloat16, kFloat64}) {
    EXPECT_TRUE(same_as_cpu(dev(), s, [&](Device d) { return bernoulli(empty(odd, TensorOptions(dt, d)), 0.37); }))
        << dt;
  }
  for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{37}, int64_t{2049}, int64_t{100003}}) {
    for (DType dt : {kInt64, kInt32, kFloat32, kFloat16}) {
      if (dt == kFloat16 && n > 2049) continue;
      EXPECT_TRUE(same_as_cpu(dev(), s, [&](Device d) { return randperm(n, TensorOptions(dt, d)); })) << n << " " << dt;
    }
  }
  // Weights with zeros; rows longer than a shared-memory sort (the race keys then take the radix sort).
  for (const Shape& shape : {Shape{3, 50}, Shape{2, 6000}, Shape{1, 100000}, Shape{700, 9}}) {
    const int64_t cats = shape[1];
    std::vector<double> wv(static_cast<size_t>(shape[0] * cats));
    for (size_t i = 0; i < wv.size(); ++i) wv[i] = i % cats % 5 == 2 ? 0.0 : 0.05 + static_cast<double>(i * 7919 % 1000);
    const Tensor w = make(wv, shape);
    const int64_t few = std::min<int64_t>(cats / 2, 100);
    EXPECT_TRUE(same_as_cpu(dev(), s, [&](Device d) { return multinomial(w.to(d), 3 * cats + 1, true); }))
        << "with replacement, " << cats;
    EXPECT_TRUE(same_as_cpu(dev(), s, [&](Device d) { return multinomial(w.to(d, kFloat32), few, false); }))
        << "without replacement, " << cats;
    EXPECT_TRUE(same_as_cpu(dev(), s, [&](Device d) { return multinomial(w[0].to(d), 5, true); })) << "1-d, " << cats;
  }
}

}  // namespace
}  // namespace rtx::testing
