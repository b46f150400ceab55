// Deterministic mode end to end: a training step of a small network that touches every op family
// with a reduction inside (convolution, batch and layer normalization, pooling, embedding and its
// scattered gradient, matmul, softmax, dropout, cross-entropy, index_add, sums) runs twice from the
// same seed and must leave bitwise identical parameters, gradients and running statistics.
#include <map>
#include <string>
#include <vector>

#include "test_utils.h"

namespace rtx::testing {
namespace {

class DeterminismTest : public DeviceTest {};
INSTANTIATE_DEVICE_TESTS(DeterminismTest);

// Everything a training step leaves behind, by name.
using State = std::map<std::string, Tensor>;

State train_step(Device dev, DType dt) {
  manual_seed(1234);
  const TensorOptions opts(dt, dev);
  State s;
  const auto param = [&](const std::string& name, const Shape& shape, double scale) {
    s[name] = (randn(shape, opts) * scale).detach().requires_grad_();
    return s[name];
  };
  const Tensor conv_w = param("conv_w", {8, 3, 3, 3}, 0.3), conv_b = param("conv_b", {8}, 0.1);
  const Tensor bn_w = param("bn_w", {8}, 1.0), bn_b = param("bn_b", {8}, 0.1);
  const Tensor emb = param("emb", {50, 16}, 1.0);
  const Tensor ln_w = param("ln_w", {16}, 1.0), ln_b = param("ln_b", {16}, 0.1);
  const Tensor fc_w = param("fc_w", {10, 8 * 4 * 4 + 16}, 0.1), fc_b = param("fc_b", {10}, 0.1);
  s["running_mean"] = zeros({8}, opts);
  s["running_var"] = ones({8}, opts);

  const Tensor images = randn({32, 3, 8, 8}, opts);
  // Repeated tokens: several positions scatter into the same embedding row.
  const Tensor tokens = randint(0, 12, {32, 6}, TensorOptions(kInt64, dev));
  const Tensor labels = randint(0, 10, {32}, TensorOptions(kInt64, dev));

  Tensor h = conv2d(images, conv_w, conv_b, {1, 1}, {1, 1});
  h = batch_norm(h, s["running_mean"], s["running_var"], bn_w, bn_b, true);
  h = max_pool2d(relu(h), {2, 2}).flatten(1);
  Tensor t = layer_norm(embedding(emb, tokens), {16}, ln_w, ln_b);
  t = (softmax(t, -1) * t).mean({1});
  Tensor feats = dropout(cat({h, gelu(t)}, 1), 0.1);
  // A row-wise scatter with collisions: sample i adds into row i % 4, then the rows are broadcast back.
  const Tensor rows = arange(0, 32, 1, TensorOptions(kInt64, dev)).remainder(4);
  const Tensor pooled = index_add(zeros({4, feats.size(1)}, opts), 0, rows, feats);
  feats = feats + pooled.index_select(0, rows) * 0.01;
  const Tensor loss = cross_entropy(linear(feats, fc_w, fc_b), labels, {}, -100, Reduction::Mean, 0.1);
  loss.backward();
  s["loss"] = loss.detach();

  NoGradGuard no_grad;
  for (const char* name : {"conv_w", "conv_b", "bn_w", "bn_b", "emb", "ln_w", "ln_b", "fc_w", "fc_b"}) {
    Tensor& p = s[name];
    s[std::string(name) + ".grad"] = p.grad();
    s[name] = p.detach() - p.grad() * 0.1;
  }
  return s;
}

TEST_P(DeterminismTest, TrainingStepIsBitwiseReproducible) {
  DeterministicGuard deterministic;
  for (DType dt : {kFloat32, kBFloat16}) {
    const State first = train_step(dev(), dt), second = train_step(dev(), dt);
    ASSERT_EQ(first.size(), second.size());
    for (const auto& [name, value] : first) {
      ASSERT_TRUE(value.defined()) << name;
      EXPECT_TRUE(same_bytes(value, second.at(name))) << name << " " << dtype_name(dt);
    }
  }
}

}  // namespace
}  // namespace rtx::testing
