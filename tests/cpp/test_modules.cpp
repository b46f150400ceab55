// Tests of rtx::nn modules: registration and PyTorch's parameter, buffer and state_dict key names for
// nested containers, load_state_dict round trips and errors, train/eval behaviour of Dropout and
// BatchNorm, Linear and Conv2d against naive float64 loops, PyTorch's default initialization and its
// reproducibility, in-place dtype and device conversion, zero_grad, printing, and a small regression
// trained with each optimizer.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "test_utils.h"

namespace rtx::testing {
namespace {

using nn::BatchNorm1d;
using nn::BatchNorm2d;
using nn::Conv2d;
using nn::Linear;
using nn::Sequential;

class ModuleTest : public DeviceTest {};
INSTANTIATE_DEVICE_TESTS(ModuleTest);

// A model with its own parameter, a nested Sequential and a head without bias.
struct TinyNet : nn::Module {
  std::shared_ptr<Sequential> features;
  std::shared_ptr<Linear> head;
  Tensor scale;

  TinyNet() {
    features = register_module(
        "features", std::make_shared<Sequential>(std::make_shared<Linear>(4, 8), std::make_shared<nn::ReLU>(),
                                                 std::make_shared<Sequential>(std::make_shared<Linear>(8, 8),
                                                                              std::make_shared<nn::LayerNorm>(8))));
    head = register_module("head", std::make_shared<Linear>(8, 2, false));
    scale = register_parameter("scale", ones({1}));
  }
  Tensor forward(const Tensor& x) override { return (*head)((*features)(x)) * scale; }
};

// conv -> batch norm -> relu -> pool -> flatten -> linear, for [N, 1, 4, 4] inputs.
std::shared_ptr<Sequential> conv_net() {
  return std::make_shared<Sequential>(std::make_shared<Conv2d>(1, 4, 3, 1, 1), std::make_shared<BatchNorm2d>(4),
                                      std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(2),
                                      std::make_shared<nn::Flatten>(), std::make_shared<Linear>(16, 10));
}

std::vector<std::string> keys(const nn::TensorDict& d) { return d.keys(); }

// ---- names and traversal ---------------------------------------------------------------------------

TEST(Module, NamedParametersFollowRegistrationOrderWithDottedNames) {
  TinyNet net;
  const std::vector<std::string> expected{"scale",
                                          "features.0.weight",
                                          "features.0.bias",
                                          "features.2.0.weight",
                                          "features.2.0.bias",
                                          "features.2.1.weight",
                                          "features.2.1.bias",
                                          "head.weight"};
  const nn::TensorDict named = net.named_parameters();
  EXPECT_EQ(keys(named), expected);
  EXPECT_EQ(named["features.2.0.weight"].sizes(), (Shape{8, 8}));
  EXPECT_TRUE(named["head.weight"].is_same(net.head->weight));
  const TensorList params = net.parameters();
  ASSERT_EQ(params.size(), expected.size());
  for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(params[i].is_same(named[expected[i]]));
  EXPECT_EQ(keys(net.named_parameters(false)), std::vector<std::string>{"scale"});
  EXPECT_EQ(net.num_parameters(), 1 + 4 * 8 + 8 + 8 * 8 + 8 + 8 + 8 + 8 * 2);

  ASSERT_EQ(net.children().size(), 2u);
  EXPECT_EQ(net.named_children()[1].first, "head");
  std::vector<std::string> module_names;
  for (const auto& [name, m] : net.named_modules()) module_names.push_back(name);
  EXPECT_EQ(module_names, (std::vector<std::string>{"", "features", "features.0", "features.1", "features.2",
                                                    "features.2.0", "features.2.1", "head"}));
}

TEST(Module, AParameterSharedByTwoModulesIsListedOnce) {
  auto first = std::make_shared<Linear>(3, 3);
  auto second = std::make_shared<Linear>(3, 3);
  Sequential tied{first, second};
  struct Tied : nn::Module {
    explicit Tied(const Tensor& w) { register_parameter("w", w); }
  };
  tied.push_back(std::make_shared<Tied>(first->weight));
  EXPECT_EQ(keys(tied.named_parameters()), (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias"}));
  EXPECT_EQ(tied.state_dict().size(), 5u);  // state_dict keeps every name, as PyTorch's
}

TEST(Module, StateDictKeysMatchPyTorchForAConvNet) {
  auto net = conv_net();
  EXPECT_EQ(keys(net->state_dict()),
            (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var",
                                      "1.num_batches_tracked", "5.weight", "5.bias"}));
  EXPECT_EQ(keys(net->named_buffers()),
            (std::vector<std::string>{"1.running_mean", "1.running_var", "1.num_batches_tracked"}));
  const nn::TensorDict state = net->state_dict();
  EXPECT_EQ(state["1.num_batches_tracked"].dtype(), kInt64);
  EXPECT_EQ(state["1.num_batches_tracked"].dim(), 0);
  EXPECT_FALSE(state["0.weight"].requires_grad());
  EXPECT_TRUE(state["0.weight"].shares_storage(net->parameters()[0]));
  EXPECT_EQ((*net)(randn({2, 1, 4, 4})).sizes(), (Shape{2, 10}));
}

TEST(Module, RegistrationErrors) {
  struct Bad : nn::Module {};
  Bad m;
  m.register_parameter("w", ones({2}));
  EXPECT_TRUE(throws<ValueError>([&] { m.register_parameter("w", ones({2})); }, "'w' is already registered"));
  EXPECT_TRUE(throws<ValueError>([&] { m.register_buffer("w", ones({2})); }, "'w' is already registered"));
  EXPECT_TRUE(throws<ValueError>([&] { m.register_parameter("a.b", ones({2})); }, "must not contain '.'"));
  EXPECT_TRUE(throws<ValueError>([&] { m.register_module("", std::make_shared<nn::ReLU>()); }, "must not be empty"));
  const Tensor non_leaf = ones({2}).requires_grad_() * 2;
  EXPECT_TRUE(throws<ValueError>([&] { m.register_parameter("v", non_leaf); }, "pass a leaf"));
  EXPECT_TRUE(throws<Error>([&] { m.forward(ones({2})); }, "Bad does not override forward"));
  Sequential seq{std::make_shared<nn::ReLU>()};
  EXPECT_EQ(seq.size(), 1u);
  EXPECT_TRUE(throws<IndexError>([&] { seq[1]; }, "index 1 is out of range for 1 modules"));
}

// ---- state dicts ---------------------------------------------------------------------------------

TEST(Module, LoadStateDictRoundTrip) {
  manual_seed(1);
  auto source = conv_net();
  source->train();
  (*source)(randn({4, 1, 4, 4}));  // running statistics and num_batches_tracked move away from their defaults
  manual_seed(2);
  auto target = conv_net();
  const Tensor target_weight = target->parameters()[0];
  const nn::LoadStateDictResult result = target->load_state_dict(source->state_dict());
  EXPECT_TRUE(result.missing_keys.empty() && result.unexpected_keys.empty());
  for (const auto& [key, value] : source->state_dict()) EXPECT_TRUE(same_bytes(target->state_dict()[key], value)) << key;
  EXPECT_EQ(target->state_dict()["1.num_batches_tracked"].item<int64_t>(), 1);
  // Values are copied into the existing tensors: handles stay, parameters stay trainable leaves.
  EXPECT_TRUE(target->parameters()[0].is_same(target_weight));
  EXPECT_TRUE(target_weight.requires_grad() && target_weight.is_leaf());
  EXPECT_FALSE(target_weight.shares_storage(source->parameters()[0]));
  source->eval();
  target->eval();
  const Tensor x = randn({3, 1, 4, 4});
  EXPECT_TRUE(same_bytes((*target)(x), (*source)(x)));
}

TEST(Module, LoadStateDictErrorsNameTheKeys) {
  auto net = conv_net();
  const nn::TensorDict good = net->state_dict();
  const Tensor weight_before = net->parameters()[0].clone();

  nn::TensorDict missing;
  for (const auto& [key, value] : good)
    if (key != "1.running_var") missing.insert(key, value);
  EXPECT_TRUE(throws<ValueError>([&] { net->load_state_dict(missing); }, "missing keys [1.running_var], unexpected keys []"));

  nn::TensorDict unexpected = good;
  unexpected.insert("6.weight", zeros({1}));
  EXPECT_TRUE(throws<ValueError>([&] { net->load_state_dict(unexpected); }, "unexpected keys [6.weight]"));

  nn::TensorDict wrong_shape;
  for (const auto& [key, value] : good) wrong_shape.insert(key, value.clone() + (value.is_floating_point() ? 1 : 0));
  wrong_shape.insert("5.weight", zeros({10, 15}));
  EXPECT_TRUE(throws<ShapeError>([&] { net->load_state_dict(wrong_shape, false); },
                                 "'5.weight' has shape [10, 15] in the state dict but [10, 16] in the module"));
  EXPECT_TRUE(same_bytes(net->parameters()[0], weight_before));  // nothing copied when it raises

  // Not strict: matching keys are copied and the others reported.
  nn::TensorDict partial;
  partial.insert("0.weight", zeros({4, 1, 3, 3}));
  partial.insert("extra", zeros({2}));
  const nn::LoadStateDictResult result = net->load_state_dict(partial, false);
  EXPECT_EQ(result.unexpected_keys, std::vector<std::string>{"extra"});
  EXPECT_EQ(result.missing_keys.size(), good.size() - 1);
  EXPECT_EQ(result.missing_keys.front(), "0.bias");
  EXPECT_EQ(values(net->parameters()[0]), std::vector<double>(36, 0.0));
}

// ---- modes ---------------------------------------------------------------------------------------

TEST_P(ModuleTest, TrainAndEvalSwitchDropout) {
  Sequential net{std::make_shared<nn::Dropout>(0.5)};
  net.to(dev());
  const Tensor x = ones({2000}, TensorOptions(kFloat32, dev()));
  EXPECT_TRUE(net.is_training() && net[0]->is_training());
  const std::vector<double> dropped = values(net(x));
  int64_t zeros_seen = 0;
  for (double v : dropped) {
    EXPECT_TRUE(v == 0.0 || v == 2.0) << v;
    zeros_seen += v == 0.0;
  }
  EXPECT_GT(zeros_seen, 850);
  EXPECT_LT(zeros_seen, 1150);
  net.eval();
  EXPECT_FALSE(net.is_training() || net[0]->is_training());
  EXPECT_TRUE(same_bytes(net(x), x));
}

TEST_P(ModuleTest, TrainAndEvalSwitchBatchNorm) {
  BatchNorm1d bn(3);
  bn.to(dev(), kFloat64);
  const std::vector<double> xs = smooth(8 * 3, 5);
  const Tensor x = make(xs, {8, 3}, dev());
  const Tensor y = bn(x);
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 1);
  std::vector<double> mean(3, 0.0), var(3, 0.0), expected(24);
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 3; ++c) mean[c] += xs[r * 3 + c] / 8;
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 3; ++c) var[c] += (xs[r * 3 + c] - mean[c]) * (xs[r * 3 + c] - mean[c]) / 8;
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 3; ++c) expected[r * 3 + c] = (xs[r * 3 + c] - mean[c]) / std::sqrt(var[c] + 1e-5);
  EXPECT_TRUE(all_close(y, make(expected, {8, 3}), 1e-10, 1e-10));
  std::vector<double> running_mean(3), running_var(3);
  for (int c = 0; c < 3; ++c) {
    running_mean[c] = 0.1 * mean[c];
    running_var[c] = 0.9 + 0.1 * var[c] * 8 / 7;  // unbiased batch variance
  }
  EXPECT_TRUE(all_close(bn.running_mean, make(running_mean, {3}), 1e-12, 1e-14));
  EXPECT_TRUE(all_close(bn.running_var, make(running_var, {3}), 1e-12, 1e-14));

  bn.eval();
  const Tensor z = bn(x);
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 3; ++c)
      expected[r * 3 + c] = (xs[r * 3 + c] - running_mean[c]) / std::sqrt(running_var[c] + 1e-5);
  EXPECT_TRUE(all_close(z, make(expected, {8, 3}), 1e-10, 1e-10));
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 1);
  EXPECT_TRUE(all_close(bn.running_mean, make(running_mean, {3}), 1e-12, 1e-14));
  EXPECT_TRUE(throws<ShapeError>([&] { bn(zeros({2, 3, 4, 5}, TensorOptions(kFloat64, dev()))); },
                                 "expected an input of 2 or 3 dims"));
}

// ---- forwards against naive loops ----------------------------------------------------------------

TEST_P(ModuleTest, LinearForwardMatchesNaiveLoop) {
  Linear fc(5, 4);
  fc.to(dev(), kFloat64);
  const std::vector<double> xs = smooth(3 * 5, 7), w = values(fc.weight), b = values(fc.bias);
  std::vector<double> expected(3 * 4);
  for (int i = 0; i < 3; ++i)
    for (int o = 0; o < 4; ++o) {
      double acc = b[o];
      for (int k = 0; k < 5; ++k) acc += xs[i * 5 + k] * w[o * 5 + k];
      expected[i * 4 + o] = acc;
    }
  const Tensor y = fc(make(xs, {3, 5}, dev()));
  EXPECT_EQ(y.device(), dev());
  EXPECT_TRUE(all_close(y, make(expected, {3, 4}), 1e-12, 1e-12));

  Linear no_bias(5, 4, false);
  EXPECT_FALSE(no_bias.bias.defined());
  EXPECT_EQ(keys(no_bias.named_parameters()), std::vector<std::string>{"weight"});
}

TEST_P(ModuleTest, Conv2dForwardMatchesNaiveLoop) {
  const int64_t n = 2, cin = 3, cout = 4, h = 5, w = 6, k = 3, stride = 2, pad = 1;
  Conv2d conv(cin, cout, k, stride, pad);
  conv.to(dev(), kFloat64);
  const std::vector<double> xs = smooth(n * cin * h * w, 9), wt = values(conv.weight), b = values(conv.bias);
  const int64_t oh = (h + 2 * pad - k) / stride + 1, ow = (w + 2 * pad - k) / stride + 1;
  std::vector<double> expected(n * cout * oh * ow);
  for (int64_t b_ = 0; b_ < n; ++b_)
    for (int64_t o = 0; o < cout; ++o)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = b[o];
          for (int64_t c = 0; c < cin; ++c)
            for (int64_t di = 0; di < k; ++di)
              for (int64_t dj = 0; dj < k; ++dj) {
                const int64_t r = i * stride - pad + di, q = j * stride - pad + dj;
                if (r < 0 || r >= h || q < 0 || q >= w) continue;
                acc += xs[((b_ * cin + c) * h + r) * w + q] * wt[((o * cin + c) * k + di) * k + dj];
              }
          expected[((b_ * cout + o) * oh + i) * ow + j] = acc;
        }
  EXPECT_TRUE(all_close(conv(make(xs, {n, cin, h, w}, dev())), make(expected, {n, cout, oh, ow}), 1e-12, 1e-12));
}

TEST_P(ModuleTest, ParameterFreeLayersMatchTheirOps) {
  const Tensor x = make(smooth(2 * 3 * 4 * 4, 3), {2, 3, 4, 4}, dev());
  EXPECT_TRUE(same_bytes(nn::ReLU()(x), relu(x)));
  EXPECT_TRUE(same_bytes(nn::GELU("tanh")(x), gelu(x, "tanh")));
  EXPECT_TRUE(same_bytes(nn::MaxPool2d(2)(x), max_pool2d(x, {2, 2}, {2, 2})));
  EXPECT_EQ(nn::MaxPool2d(3, 1, 1)(x).sizes(), (Shape{2, 3, 4, 4}));
  EXPECT_EQ(nn::Flatten()(x).sizes(), (Shape{2, 48}));
  nn::Embedding emb(10, 3, 0);
  emb.to(dev(), kFloat64);
  const Tensor idx = make({0, 4, 4}, {3}, dev(), kInt64);
  EXPECT_TRUE(same_bytes(emb(idx), embedding(emb.weight, idx)));
  EXPECT_EQ(values(emb(idx)).front(), 0.0);
  nn::LayerNorm ln(Shape{4, 4});
  ln.to(dev(), kFloat64);
  EXPECT_TRUE(same_bytes(ln(x), layer_norm(x, {4, 4}, ln.weight, ln.bias)));
  EXPECT_TRUE(throws<ValueError>([] { nn::Dropout(1.5); }, "p must be in [0, 1], got 1.5"));
  EXPECT_TRUE(throws<ValueError>([] { nn::GELU("fast"); }, "'fast'"));
}

// ---- initialization ------------------------------------------------------------------------------

TEST(Module, DefaultInitializationFollowsPyTorch) {
  manual_seed(3);
  Linear fc(100, 50);
  const double bound = 1.0 / std::sqrt(100.0);
  double largest = 0.0;
  for (double v : values(fc.weight)) {
    EXPECT_LE(std::fabs(v), bound);
    largest = std::max(largest, std::fabs(v));
  }
  EXPECT_GT(largest, 0.95 * bound);  // uniform over the whole range, not a narrower one
  for (double v : values(fc.bias)) EXPECT_LE(std::fabs(v), bound);

  Conv2d conv(3, 8, 3);
  const double conv_bound = 1.0 / std::sqrt(27.0);
  largest = 0.0;
  for (double v : values(conv.weight)) {
    EXPECT_LE(std::fabs(v), conv_bound);
    largest = std::max(largest, std::fabs(v));
  }
  EXPECT_GT(largest, 0.9 * conv_bound);
  for (double v : values(conv.bias)) EXPECT_LE(std::fabs(v), conv_bound);

  nn::Embedding emb(1000, 16);
  EXPECT_NEAR(emb.weight.mean().item<double>(), 0.0, 0.03);
  EXPECT_NEAR(emb.weight.std().item<double>(), 1.0, 0.03);

  BatchNorm2d bn(3);
  EXPECT_EQ(values(bn.weight), std::vector<double>(3, 1.0));
  EXPECT_EQ(values(bn.bias), std::vector<double>(3, 0.0));
  EXPECT_EQ(values(bn.running_mean), std::vector<double>(3, 0.0));
  EXPECT_EQ(values(bn.running_var), std::vector<double>(3, 1.0));
  nn::LayerNorm ln(5);
  EXPECT_EQ(values(ln.weight), std::vector<double>(5, 1.0));
  EXPECT_EQ(values(ln.bias), std::vector<double>(5, 0.0));
}

TEST(Module, InitializationIsReproducibleFromTheSeed) {
  manual_seed(42);
  auto a = conv_net();
  manual_seed(42);
  auto b = conv_net();
  manual_seed(43);
  auto c = conv_net();
  for (const auto& [key, value] : a->state_dict()) EXPECT_TRUE(same_bytes(b->state_dict()[key], value)) << key;
  EXPECT_FALSE(same_bytes(c->state_dict()["0.weight"], a->state_dict()["0.weight"]));
}

// ---- conversions and gradients -------------------------------------------------------------------

TEST_P(ModuleTest, ToConvertsInPlaceKeepingHandlesAndLeaves) {
  auto fc = std::make_shared<Linear>(2, 3);
  auto bn = std::make_shared<BatchNorm1d>(3);
  Sequential net{fc, bn};
  const Tensor weight = fc->weight;
  optim::SGD opt(net.parameters(), optim::SgdOptions{0.1});  // built before the conversion
  net(randn({4, 2})).sum().backward();
  ASSERT_TRUE(weight.grad().defined());

  net.to(kFloat64);
  net.to(dev());
  EXPECT_EQ(weight.dtype(), kFloat64);
  EXPECT_EQ(weight.device(), dev());
  EXPECT_TRUE(net.parameters()[0].is_same(weight));
  EXPECT_TRUE(weight.requires_grad() && weight.is_leaf());
  EXPECT_EQ(weight.grad().dtype(), kFloat64);
  EXPECT_EQ(weight.grad().device(), dev());
  EXPECT_EQ(bn->running_mean.dtype(), kFloat64);
  EXPECT_EQ(bn->num_batches_tracked.dtype(), kInt64);
  EXPECT_EQ(bn->num_batches_tracked.device(), dev());

  const Tensor before = weight.clone();
  opt.step();
  EXPECT_TRUE(all_close(weight, before - 0.1 * weight.grad(), 1e-12, 1e-12));
  const Tensor y = net(randn({4, 2}, TensorOptions(kFloat64, dev())));
  EXPECT_EQ(y.dtype(), kFloat64);
  EXPECT_EQ(y.device(), dev());
}

TEST(Module, ZeroGradLeavesGradientsUndefined) {
  TinyNet net;
  net(randn({3, 4})).sum().backward();
  for (const auto& p : net.parameters()) EXPECT_TRUE(p.grad().defined());
  net.zero_grad();
  for (const auto& p : net.parameters()) EXPECT_FALSE(p.grad().defined());
}

// ---- printing ------------------------------------------------------------------------------------

TEST(Module, ReprMatchesPyTorch) {
  EXPECT_EQ(conv_net()->repr(),
            "Sequential(\n"
            "  (0): Conv2d(1, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))\n"
            "  (1): BatchNorm2d(4, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)\n"
            "  (2): ReLU()\n"
            "  (3): MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)\n"
            "  (4): Flatten(start_dim=1, end_dim=-1)\n"
            "  (5): Linear(in_features=16, out_features=10, bias=True)\n"
            ")");
  EXPECT_EQ(TinyNet().repr(),
            "TinyNet(\n"
            "  (features): Sequential(\n"
            "    (0): Linear(in_features=4, out_features=8, bias=True)\n"
            "    (1): ReLU()\n"
            "    (2): Sequential(\n"
            "      (0): Linear(in_features=8, out_features=8, bias=True)\n"
            "      (1): LayerNorm((8,), eps=1e-05, elementwise_affine=True)\n"
            "    )\n"
            "  )\n"
            "  (head): Linear(in_features=8, out_features=2, bias=False)\n"
            ")");
  EXPECT_EQ(nn::Dropout(0.1).repr(), "Dropout(p=0.1, inplace=False)");
  EXPECT_EQ(nn::Dropout(1).repr(), "Dropout(p=1.0, inplace=False)");
  EXPECT_EQ(nn::Embedding(10, 3, -1).repr(), "Embedding(10, 3, padding_idx=9)");
  EXPECT_EQ(Conv2d(3, 8, 5, 2, 0, false).repr(), "Conv2d(3, 8, kernel_size=(5, 5), stride=(2, 2), bias=False)");
  EXPECT_EQ(nn::GELU().repr(), "GELU(approximate='none')");
}

// ---- training ------------------------------------------------------------------------------------

// Trains a small MLP on y = x . (1, -2, 0.5) + 0.3 for steps and returns the first and last losses.
std::pair<double, double> train_regression(optim::Optimizer& opt, Sequential& net, Device dev, int steps) {
  manual_seed(7);
  const Tensor x = randn({64, 3}, TensorOptions(kFloat32, dev));
  const Tensor w = make({1.0, -2.0, 0.5}, {3, 1}, dev, kFloat32);
  const Tensor y = matmul(x, w) + 0.3;
  double first = 0, last = 0;
  for (int s = 0; s < steps; ++s) {
    opt.zero_grad();
    const Tensor loss = mse_loss(net(x), y);
    loss.backward();
    opt.step();
    last = loss.item<double>();
    if (s == 0) first = last;
  }
  return {first, last};
}

std::shared_ptr<Sequential> regression_net(Device dev) {
  manual_seed(0);
  auto net = std::make_shared<Sequential>(std::make_shared<Linear>(3, 16), std::make_shared<nn::GELU>(),
                                          std::make_shared<Linear>(16, 1));
  net->to(dev);
  return net;
}

TEST_P(ModuleTest, ATinyRegressionTrainsWithEachOptimizer) {
  auto sgd_net = regression_net(dev());
  optim::SGD sgd(sgd_net->parameters(), optim::SgdOptions{0.05, 0.9});
  auto adam_net = regression_net(dev());
  optim::Adam adam(adam_net->parameters(), optim::AdamOptions{0.02});
  auto adamw_net = regression_net(dev());
  optim::AdamW adamw(adamw_net->parameters(), optim::AdamOptions{0.02, {0.9, 0.999}, 1e-8, 0.01});
  const std::vector<std::pair<optim::Optimizer*, Sequential*>> runs{
      {&sgd, sgd_net.get()}, {&adam, adam_net.get()}, {&adamw, adamw_net.get()}};
  for (const auto& [opt, net] : runs) {
    const auto [first, last] = train_regression(*opt, *net, dev(), 150);
    EXPECT_LT(last, 0.02 * first) << net->repr();
  }
}

}  // namespace
}  // namespace rtx::testing
