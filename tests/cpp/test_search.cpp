// unique, unique_consecutive, bincount, searchsorted and bucketize on every device: against
// hand-worked answers and a brute-force count, with errors naming the op.
#include "test_utils.h"

namespace rtx::testing {
namespace {

class SearchTest : public DeviceTest {};
INSTANTIATE_DEVICE_TESTS(SearchTest);

std::vector<double> ints(std::initializer_list<int> v) { return std::vector<double>(v.begin(), v.end()); }

TEST_P(SearchTest, UniqueSortsCountsAndInverts) {
  const Tensor x = tensor(std::vector<int64_t>{3, 1, 3, 2, 1, 3}, TensorOptions(kInt64, dev())).view({2, 3});
  const TensorList r = unique(x);
  EXPECT_EQ(values(r[0]), ints({1, 2, 3}));
  EXPECT_EQ(r[1].sizes(), (Shape{2, 3}));
  EXPECT_EQ(values(r[1]), ints({2, 0, 2, 1, 0, 2}));
  EXPECT_EQ(values(r[2]), ints({2, 1, 3}));
  const TensorList c = unique_consecutive(tensor({1.0, 1.0, 2.0, 1.0}, TensorOptions(kFloat32, dev())));
  EXPECT_EQ(values(c[0]), ints({1, 2, 1}));
  EXPECT_EQ(values(c[1]), ints({0, 0, 1, 2}));
  EXPECT_EQ(values(c[2]), ints({2, 1, 1}));
  EXPECT_EQ(unique(empty({0}, TensorOptions(kFloat32, dev())))[0].numel(), 0);
}

TEST_P(SearchTest, BincountCountsAndSumsWeights) {
  const Tensor x = tensor(std::vector<int64_t>{0, 4, 4, 1}, TensorOptions(kInt64, dev()));
  const Tensor counts = bincount(x);
  EXPECT_EQ(counts.dtype(), kInt64);
  EXPECT_EQ(values(counts), ints({1, 1, 0, 0, 2}));
  EXPECT_EQ(values(bincount(x, {}, 7)), ints({1, 1, 0, 0, 2, 0, 0}));
  const Tensor sums = bincount(x, tensor({0.5, 1.0, 2.0, 4.0}, TensorOptions(kFloat64, dev())));
  EXPECT_EQ(sums.dtype(), kFloat64);
  EXPECT_EQ(values(sums), (std::vector<double>{0.5, 4.0, 0, 0, 3.0}));
  EXPECT_TRUE(throws<ValueError>([&] { bincount(x - 1); }, "[bincount] expects non-negative values, got -1"));
  EXPECT_TRUE(throws<ValueError>([&] { bincount(x.view({2, 2})); }, "[bincount] expects a 1-d integer tensor"));
}

TEST_P(SearchTest, SearchsortedMatchesABruteForceCount) {
  const std::vector<double> seq{-1, 0, 0, 2, 5, 5, 5, 9};
  const std::vector<double> vals{-3, -1, 0, 1, 5, 5.5, 9, 12, 0};
  const Tensor s = tensor(seq, TensorOptions(kFloat64, dev())), v = tensor(vals, TensorOptions(kFloat64, dev())).view({3, 3});
  for (bool right : {false, true}) {
    std::vector<double> expected;
    for (double x : vals) {
      int n = 0;
      for (double e : seq) n += right ? e <= x : e < x;
      expected.push_back(n);
    }
    const Tensor found = searchsorted(s, v, right);
    EXPECT_EQ(found.sizes(), (Shape{3, 3}));
    EXPECT_EQ(found.dtype(), kInt64);
    EXPECT_EQ(values(found), expected) << "right=" << right;
    EXPECT_EQ(values(bucketize(v, s, right)), expected);
  }
  EXPECT_EQ(searchsorted(s, v, false, true).dtype(), kInt32);
  // Rows search their own row; sorter orders an unsorted sequence.
  const Tensor rows = tensor({1.0, 2.0, 3.0, 10.0, 20.0, 30.0}, TensorOptions(kFloat32, dev())).view({2, 3});
  const Tensor q = tensor({2.5, 0.0, 25.0, 40.0}, TensorOptions(kFloat32, dev())).view({2, 2});
  EXPECT_EQ(values(searchsorted(rows, q)), ints({2, 0, 2, 3}));
  const Tensor shuffled = tensor({5.0, 1.0, 3.0}, TensorOptions(kFloat32, dev()));
  EXPECT_EQ(values(searchsorted(shuffled, tensor({2.0, 4.0}, TensorOptions(kFloat32, dev())), false, false,
                                argsort(shuffled))),
            ints({1, 2}));
  EXPECT_TRUE(throws<ShapeError>([&] { searchsorted(rows, q.view({4})); }, "[searchsorted] sorted_sequence [2, 3]"));
}

}  // namespace
}  // namespace rtx::testing
