// Tests of the joining and splitting ops (cat, stack, split, chunk): forward against naive float64
// loops, dtype promotion, the legacy empty-tensor rule, views without copies, gradients and errors.
#include <cstring>
#include <random>

#include "test_utils.h"

namespace rtx::testing {
namespace {

class JoinTest : public DeviceTest {};

// cat of parts (each viewed as [outer, size_k, inner]) along dim, by copying element by element.
std::vector<double> ref_cat(const TensorList& parts, int64_t dim, Shape& shape) {
  shape = parts[0].sizes();
  shape[dim] = 0;
  for (const auto& p : parts) shape[dim] += p.size(dim);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= shape[d];
  for (size_t d = dim + 1; d < shape.size(); ++d) inner *= shape[d];
  std::vector<std::vector<double>> vals;
  for (const auto& p : parts) vals.push_back(values(p));
  std::vector<double> out;
  for (int64_t o = 0; o < outer; ++o)
    for (size_t k = 0; k < parts.size(); ++k) {
      const int64_t block = parts[k].size(dim) * inner;
      out.insert(out.end(), vals[k].begin() + o * block, vals[k].begin() + (o + 1) * block);
    }
  return out;
}

// ---- cat --------------------------------------------------------------------------------------

TEST_P(JoinTest, CatMatchesReferenceAlongEveryDim) {
  for (DType dt : {kFloat32, kFloat64, kFloat16, kInt64, kBool}) {
    for (int64_t dim : {0, 1, 2, -1, -3}) {
      const int64_t d = dim < 0 ? dim + 3 : dim;
      TensorList parts;
      for (int64_t k = 0; k < 3; ++k) {
        Shape s{2, 3, 4};
        s[d] = k + 1;
        parts.push_back(quarter_tensor(s, static_cast<uint32_t>(k), dev(), dt));
      }
      Shape shape;
      const auto ref = ref_cat(parts, d, shape);
      Tensor out = cat(parts, dim);
      EXPECT_EQ(out.dtype(), dt);
      EXPECT_TRUE(all_close(out, make(ref, shape))) << dt << " dim " << dim;
    }
  }
}

TEST_P(JoinTest, CatNonContiguousAndZeroSizeInputs) {
  Tensor a = quarter_tensor({4, 2, 3}, 1, dev(), kFloat32).transpose(0, 2);  // [3, 2, 4]
  Tensor b = quarter_tensor({3, 5, 4}, 2, dev(), kFloat32).slice(1, 0, 5, 2);  // [3, 3, 4], strided
  Tensor c = quarter_tensor({3, 0, 4}, 3, dev(), kFloat32);
  Tensor e = quarter_tensor({3, 1, 4}, 4, dev(), kFloat32);
  Shape shape;
  const auto ref = ref_cat({a, b, c, e}, 1, shape);
  EXPECT_TRUE(all_close(cat({a, b, c, e}, 1), make(ref, shape)));
  EXPECT_EQ(cat({c, c}, 1).sizes(), (Shape{3, 0, 4}));
  EXPECT_EQ(cat({c, c}, 0).sizes(), (Shape{6, 0, 4}));
}

TEST_P(JoinTest, CatPromotesDtypes) {
  Tensor i = quarter_tensor({2, 2}, 5, dev(), kInt64);
  Tensor f = quarter_tensor({2, 3}, 6, dev(), kFloat32);
  Tensor h = quarter_tensor({2, 1}, 7, dev(), kFloat16);
  Tensor b = quarter_tensor({2, 2}, 8, dev(), kBool);
  Tensor d = quarter_tensor({2, 2}, 9, dev(), kFloat64);
  struct Case {
    TensorList parts;
    DType dtype;
  };
  for (const Case& c : {Case{{i, f}, kFloat32}, Case{{b, i}, kInt64}, Case{{h, f}, kFloat32}, Case{{h, b}, kFloat16},
                        Case{{f, d, i}, kFloat64}}) {
    Tensor out = cat(c.parts, 1);
    EXPECT_EQ(out.dtype(), c.dtype);
    Shape shape;
    const auto ref = ref_cat(c.parts, 1, shape);
    EXPECT_TRUE(all_close(out, make(ref, shape)));
  }
}

TEST_P(JoinTest, CatSkipsLegacyEmptyTensors) {
  Tensor legacy = zeros({0}, TensorOptions(kFloat64, dev()));
  Tensor a = quarter_tensor({2, 3}, 10, dev(), kFloat32);
  Tensor b = quarter_tensor({1, 3}, 11, dev(), kFloat32);
  Tensor out = cat({legacy, a, legacy, b}, 0);
  EXPECT_EQ(out.sizes(), (Shape{3, 3}));
  EXPECT_EQ(out.dtype(), kFloat64);  // the skipped tensors still take part in the promotion
  Shape shape;
  EXPECT_TRUE(all_close(out, make(ref_cat({a, b}, 0, shape), shape)));
  EXPECT_EQ(cat({legacy, legacy}).sizes(), (Shape{0}));
  EXPECT_EQ(cat({a, legacy}, -1).sizes(), (Shape{2, 3}));
}

TEST_P(JoinTest, CatLargeRunsInParallel) {
  TensorList parts{quarter_tensor({64, 300, 8}, 12, dev(), kFloat32), quarter_tensor({64, 100, 8}, 13, dev(), kFloat32),
                   quarter_tensor({64, 5, 8}, 14, dev(), kFloat64)};
  Shape shape;
  const auto ref = ref_cat(parts, 1, shape);
  EXPECT_TRUE(all_close(cat(parts, 1), make(ref, shape)));
  TensorList rows{quarter_tensor({200000}, 15, dev(), kFloat32), quarter_tensor({300000}, 16, dev(), kFloat32)};
  const auto ref_rows = ref_cat(rows, 0, shape);
  EXPECT_TRUE(all_close(cat(rows), make(ref_rows, shape)));
}

TEST_P(JoinTest, CatErrors) {
  Tensor a = quarter_tensor({2, 3}, 17, dev(), kFloat32);
  EXPECT_TRUE(throws<ValueError>([&] { cat({}); }, "[cat] expects a non-empty list of tensors"));
  EXPECT_TRUE(throws<ShapeError>([&] { cat({a, quarter_tensor({2, 3, 1}, 18, dev(), kFloat32)}); },
                                 "[cat] tensors must have the same number of dims: tensor 1 has shape [2, 3, 1] but the "
                                 "first has [2, 3]"));
  EXPECT_TRUE(throws<ShapeError>([&] { cat({a, quarter_tensor({2, 4}, 19, dev(), kFloat32)}, 0); },
                                 "[cat] sizes must match except in dim 0: tensor 1 has shape [2, 4] but the first has "
                                 "[2, 3] (size 4 != 3 at dim 1)"));
  EXPECT_TRUE(throws<ShapeError>([&] { cat({a, scalar_tensor(1.0, TensorOptions(kFloat32, dev()))}); },
                                 "[cat] tensor 1 of the list is 0-d"));
  EXPECT_TRUE(throws<IndexError>([&] { cat({a, a}, 2); }, "[cat] dim 2 out of range"));
  EXPECT_TRUE(throws<ValueError>([&] { cat({a, Tensor()}); }, "[cat] tensor 1 of the list is undefined"));
  std::vector<float> storage(6);
  EXPECT_TRUE(throws<DeviceError>([&] { cat({a, on_other_device(dev(), storage, {2, 3})}); }, "[cat] expected all tensors on one device"));
}

// ---- stack ------------------------------------------------------------------------------------

TEST_P(JoinTest, StackMatchesReference) {
  TensorList parts;
  for (uint32_t k = 0; k < 3; ++k) parts.push_back(quarter_tensor({2, 4}, 20 + k, dev(), kFloat32));
  const auto p0 = values(parts[0]), p1 = values(parts[1]), p2 = values(parts[2]);
  const std::vector<const std::vector<double>*> pv{&p0, &p1, &p2};
  for (int64_t dim : {0, 1, 2, -1, -3}) {
    const int64_t d = dim < 0 ? dim + 3 : dim;
    Tensor out = stack(parts, dim);
    Shape shape{2, 4};
    shape.insert(shape.begin() + d, 3);
    ASSERT_EQ(out.sizes(), shape);
    const auto got = values(out);
    for (int64_t k = 0; k < 3; ++k)
      for (int64_t i = 0; i < 2; ++i)
        for (int64_t j = 0; j < 4; ++j) {
          Shape idx{i, j};
          idx.insert(idx.begin() + d, k);
          EXPECT_EQ(got[(idx[0] * shape[1] + idx[1]) * shape[2] + idx[2]], (*pv[k])[i * 4 + j]);
        }
  }
  Tensor s = stack({scalar_tensor(1.0, TensorOptions(kFloat32, dev())), scalar_tensor(2.0, TensorOptions(kFloat32, dev()))});
  EXPECT_EQ(s.sizes(), (Shape{2}));
  EXPECT_EQ(values(s), (std::vector<double>{1, 2}));
}

TEST_P(JoinTest, StackErrors) {
  Tensor a = quarter_tensor({2, 3}, 23, dev(), kFloat32);
  EXPECT_TRUE(throws<ValueError>([&] { stack({}); }, "[stack] expects a non-empty list of tensors"));
  EXPECT_TRUE(throws<ShapeError>([&] { stack({a, a.t()}); },
                                 "[stack] expects tensors of one shape, but tensor 0 has shape [2, 3] and tensor 1 has [3, 2]"));
  EXPECT_TRUE(throws<IndexError>([&] { stack({a, a}, 3); }, "[stack] dim 3 out of range"));
}

// ---- split / chunk ----------------------------------------------------------------------------

// Checks pieces are views of x along dim with the given lengths and the right values.
void expect_pieces(const TensorList& pieces, const Tensor& x, int64_t dim, const Shape& lengths) {
  ASSERT_EQ(pieces.size(), lengths.size());
  int64_t start = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    EXPECT_EQ(pieces[i].size(dim), lengths[i]) << "piece " << i;
    EXPECT_TRUE(pieces[i].shares_storage(x)) << "piece " << i << " is a copy";
    EXPECT_TRUE(all_close(pieces[i], x.slice(dim, start, start + lengths[i]).contiguous()));
    start += lengths[i];
  }
}

TEST_P(JoinTest, SplitBySizeAndSizes) {
  Tensor x = quarter_tensor({7, 4}, 24, dev(), kFloat32);
  expect_pieces(split(x, 3), x, 0, {3, 3, 1});
  expect_pieces(split(x, 7), x, 0, {7});
  expect_pieces(split(x, 10), x, 0, {7});
  expect_pieces(split(x, 2, -1), x, 1, {2, 2});
  expect_pieces(split(x, Shape{2, 0, 5}), x, 0, {2, 0, 5});
  expect_pieces(split(x.t(), Shape{1, 3}, 0), x.t(), 0, {1, 3});
  Tensor empty = quarter_tensor({0, 3}, 25, dev(), kFloat32);
  expect_pieces(split(empty, 0), empty, 0, {0});
  expect_pieces(split(empty, 2), empty, 0, {0});
  // Pieces write through to x.
  TensorList pieces = split(x, 3);
  pieces[1].fill_(42.0);
  EXPECT_EQ(x[3][0].item<double>(), 42.0);
}

TEST_P(JoinTest, ChunkSizes) {
  Tensor x = quarter_tensor({5, 6}, 26, dev(), kFloat32);
  expect_pieces(chunk(x, 3), x, 0, {2, 2, 1});
  expect_pieces(chunk(x, 5), x, 0, {1, 1, 1, 1, 1});
  expect_pieces(chunk(x, 8), x, 0, {1, 1, 1, 1, 1});
  expect_pieces(chunk(x, 4, 1), x, 1, {2, 2, 2});  // like PyTorch: fewer chunks than asked
  expect_pieces(chunk(x, 1, -1), x, 1, {6});
  Tensor empty = quarter_tensor({0, 3}, 27, dev(), kFloat32);
  expect_pieces(chunk(empty, 3), empty, 0, {0, 0, 0});
}

TEST_P(JoinTest, SplitAndChunkErrors) {
  Tensor x = quarter_tensor({5, 2}, 28, dev(), kFloat32);
  EXPECT_TRUE(throws<ValueError>([&] { split(x, Shape{2, 2}); },
                                 "[split] split_sizes [2, 2] add up to 4, but dim 0 of the input (shape [5, 2]) has size 5"));
  EXPECT_TRUE(throws<ValueError>([&] { split(x, Shape{6, -1}); }, "[split] split_sizes must be nonnegative"));
  EXPECT_TRUE(throws<ValueError>([&] { split(x, -1); }, "[split] split_size must be nonnegative, got -1"));
  EXPECT_TRUE(throws<ValueError>([&] { split(x, 0); }, "[split] split_size can only be 0 when dim 0 has size 0"));
  EXPECT_TRUE(throws<ValueError>([&] { chunk(x, 0); }, "[chunk] chunks must be positive, got 0"));
  EXPECT_TRUE(throws<ValueError>([&] { chunk(x, -2); }, "[chunk] chunks must be positive, got -2"));
  EXPECT_TRUE(throws<ShapeError>([&] { chunk(scalar_tensor(1.0), 2); }, "[chunk] needs a tensor with at least 1 dim"));
  EXPECT_TRUE(throws<IndexError>([&] { split(x, 1, 2); }, "[split] dim 2 out of range"));
}

// ---- gradients --------------------------------------------------------------------------------

TEST_P(JoinTest, Gradients) {
  Tensor a = quarter_tensor({2, 3}, 29, dev(), kFloat64).requires_grad_();
  Tensor b = quarter_tensor({2, 1}, 30, dev(), kFloat64).requires_grad_();
  Tensor c = quarter_tensor({2, 3}, 31, dev(), kFloat64).requires_grad_();
  Tensor legacy = zeros({0}, TensorOptions(kFloat64, dev()));
  Fn cat_fn = [&](const TensorList& in) { return TensorList{cat({in[0], legacy, in[1], in[0]}, 1)}; };
  Fn stack_fn = [](const TensorList& in) { return TensorList{stack({in[0], in[1]}, 1)}; };
  Fn split_fn = [](const TensorList& in) { return split(in[0], Shape{1, 2}, 1); };
  Fn chunk_fn = [](const TensorList& in) { return chunk(in[0], 2, 1); };
  EXPECT_TRUE(gradcheck(cat_fn, {a, b}));
  EXPECT_TRUE(gradgradcheck(squared(cat_fn), {a, b}));
  EXPECT_TRUE(gradcheck(stack_fn, {a, c}));
  EXPECT_TRUE(gradgradcheck(squared(stack_fn), {a, c}));
  EXPECT_TRUE(gradcheck(split_fn, {a}));
  EXPECT_TRUE(gradcheck(chunk_fn, {c}));
  EXPECT_TRUE(gradgradcheck(squared(chunk_fn), {c}));
  // A float32 input concatenated into a float64 result gets a float32 gradient.
  Tensor f = quarter_tensor({1, 3}, 32, dev(), kFloat32).requires_grad_();
  Tensor out = cat({f, a}, 0);
  Tensor gf = autograd::grad({out}, {f}, {ones_like(out)})[0];
  EXPECT_EQ(gf.dtype(), kFloat32);
  EXPECT_EQ(values(gf), (std::vector<double>{1, 1, 1}));
}

// ---- many pieces and copy units ------------------------------------------------------------------

// 70 pieces (more than one launch takes), lengths giving 1- to 16-byte copy units, a strided piece
// and a bool piece (both converted on the way): the same bytes as the CPU.
TEST_P(JoinTest, CatManyPiecesMatchCpu) {
  if (dev().is_cpu()) GTEST_SKIP() << "compares the CUDA kernels against the CPU's";
  const Device cpu(kCPU);
  for (DType dt : {kInt8, kFloat16, kFloat32, kFloat64}) {
    for (int64_t dim : {0, 1, 2}) {
      TensorList parts, parts_dev;
      for (int64_t k = 0; k < 70; ++k) {
        Shape shape{3, 4, 5};
        shape[dim] = 1 + k % 7;
        Tensor t = quarter_tensor(shape, static_cast<uint32_t>(100 + k), cpu, dt);
        Tensor td = t.to(dev());
        if (k == 10) {
          t = t.to(kBool);
          td = td.to(kBool);
        } else if (k == 20) {
          td = td.transpose(1, 2).contiguous().transpose(1, 2);  // same values, strided
        }
        parts.push_back(t);
        parts_dev.push_back(td);
      }
      const Tensor got = cat(parts_dev, dim), want = cat(parts, dim);
      ASSERT_EQ(got.sizes(), want.sizes());
      const Tensor g = got.cpu();
      EXPECT_EQ(std::memcmp(g.data_ptr(), want.data_ptr(), want.nbytes()), 0) << dt << " dim " << dim;
    }
  }
  TensorList big{quarter_tensor({1000003}, 200, cpu, kInt8), quarter_tensor({999999}, 201, cpu, kInt8)};
  TensorList wide{quarter_tensor({1000, 256}, 202, cpu, kFloat32), quarter_tensor({1000, 128}, 203, cpu, kFloat32)};
  for (const auto& [list, dim] : {std::pair<TensorList, int64_t>{big, 0}, {wide, 1}}) {
    TensorList on_dev;
    for (const Tensor& t : list) on_dev.push_back(t.to(dev()));
    const Tensor got = cat(on_dev, dim).cpu(), want = cat(list, dim);
    EXPECT_EQ(std::memcmp(got.data_ptr(), want.data_ptr(), want.nbytes()), 0) << "dim " << dim;
  }
}

INSTANTIATE_DEVICE_TESTS(JoinTest);

}  // namespace
}  // namespace rtx::testing
