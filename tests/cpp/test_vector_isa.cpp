// The CPU loops built for several vector ISAs (backend/cpu/vector_isa.h) give the baseline's bits
// under every ISA this CPU has: the long-math pointwise ops (exp, sigmoid, tanh, silu, tanh GELU)
// forward and backward, softmax and log_softmax along the last and an inner dim, cross-entropy with
// and without class weights, label smoothing and ignored targets, causal attention on the CPU, layer
// and batch norm, max pooling, sums over rows (a linear layer's bias gradient) and convolutions (the
// narrow first-layer kernels, oneDNN's operands in blocks of 16 channels), in float32 and bfloat16,
// the Adam and SGD updates (their branch-free loops and the general ones) and random draws. Skips
// where the CPU has only the baseline.
#include <functional>
#include <string>
#include <vector>

#include "backend/cpu/vector_isa.h"
#include "rtx/optim.h"
#include "test_utils.h"

namespace rtx::testing {
namespace {

using cpu::VectorIsa;

// Sets the ISA of the CPU loops for a scope.
class VectorIsaGuard {
 public:
  explicit VectorIsaGuard(VectorIsa isa) : saved_(cpu::vector_isa()) { EXPECT_TRUE(cpu::set_vector_isa(isa)); }
  ~VectorIsaGuard() { cpu::set_vector_isa(saved_); }

 private:
  VectorIsa saved_;
};

const char* isa_name(VectorIsa isa) {
  switch (isa) {
    case VectorIsa::kAvx512: return "avx512";
    case VectorIsa::kAvx2: return "avx2";
    case VectorIsa::kBaseline: return "baseline";
  }
  return "?";
}

// The outputs of f and the gradients of its inputs (all of which require grad) for a fixed
// upstream gradient.
TensorList outputs_and_grads(const std::function<Tensor(const TensorList&)>& f, const TensorList& inputs0) {
  TensorList inputs;
  for (const Tensor& t : inputs0) inputs.push_back(t.detach().requires_grad_());
  const Tensor out = f(inputs);
  manual_seed(7);
  out.backward(randn(out.sizes()).to(out.dtype()));
  TensorList result{out.detach()};
  for (const Tensor& t : inputs) result.push_back(t.grad());
  return result;
}

struct Workload {
  std::string name;
  std::function<Tensor(const TensorList&)> f;
  std::vector<Shape> shapes;
};

std::vector<Workload> workloads() {
  const Tensor target = make({3, 0, -100, 6, 1, 7, 2, 5}, {8}, kCPU, kInt64);
  const Tensor weight = make({0.5, 1, 2, 1.5, 0.25, 1, 3, 0.75}, {8}, kCPU);
  std::vector<Workload> w = {
      {"exp", [](const TensorList& t) { return exp(t[0]); }, {{1000}}},
      {"sigmoid", [](const TensorList& t) { return sigmoid(t[0]); }, {{1000}}},
      {"tanh", [](const TensorList& t) { return tanh(t[0]); }, {{1000}}},
      {"silu", [](const TensorList& t) { return silu(t[0]); }, {{1000}}},
      {"gelu_tanh", [](const TensorList& t) { return gelu(t[0], "tanh"); }, {{1000}}},
      {"softmax_last", [](const TensorList& t) { return softmax(t[0], -1); }, {{6, 333}}},
      {"softmax_inner", [](const TensorList& t) { return softmax(t[0], 1); }, {{3, 77, 5}}},
      {"log_softmax_last", [](const TensorList& t) { return log_softmax(t[0], -1); }, {{6, 333}}},
      {"cross_entropy", [=](const TensorList& t) { return cross_entropy(t[0], target); }, {{8, 8}}},
      {"cross_entropy_weighted_smoothed",
       [=](const TensorList& t) {
         return cross_entropy(t[0], target, weight.to(t[0].dtype()), -100, Reduction::Mean, 0.1);
       },
       {{8, 8}}},
      {"cross_entropy_per_sample",
       [=](const TensorList& t) { return cross_entropy(t[0], target, {}, -100, Reduction::None); },
       {{8, 8}}},
      {"attention_causal",
       [](const TensorList& t) { return scaled_dot_product_attention(t[0], t[1], t[2], {}, 0.0, true); },
       {{2, 3, 70, 16}, {2, 3, 70, 16}, {2, 3, 70, 16}}},
      {"batch_norm",
       [](const TensorList& t) { return batch_norm(t[0], {}, {}, t[1], t[2], true); },
       {{4, 6, 9, 9}, {6}, {6}}},
      {"layer_norm", [](const TensorList& t) { return layer_norm(t[0], {48}, t[1], t[2]); }, {{70, 48}, {48}, {48}}},
      {"layer_norm_without_affine", [](const TensorList& t) { return layer_norm(t[0], {200}); }, {{9, 200}}},
      {"max_pool2d", [](const TensorList& t) { return max_pool2d(t[0], {2, 2}); }, {{2, 3, 10, 12}}},
      {"sum_over_rows", [](const TensorList& t) { return sum(t[0], {0}); }, {{1000, 37}}},
      {"linear_with_bias", [](const TensorList& t) { return linear(t[0], t[1], t[2]); }, {{300, 20}, {7, 20}, {7}}},
      {"conv2d_three_channels",  // float32: the narrow first-layer kernels
       [](const TensorList& t) { return conv2d(t[0], t[1], t[2], {1, 1}, {1, 1}); },
       {{2, 3, 9, 11}, {5, 3, 3, 3}, {5}}},
      {"conv2d_channel_blocks",  // with oneDNN: activations converted to and from blocks of 16 channels
       [](const TensorList& t) { return conv2d(t[0], t[1], t[2], {1, 1}, {1, 1}); },
       {{2, 16, 7, 7}, {32, 16, 3, 3}, {32}}},
  };
  return w;
}

TEST(VectorIsaTest, EveryIsaGivesTheBaselinesBits) {
  std::vector<VectorIsa> wider;
  if (cpu::cpu_vector_isa() == VectorIsa::kAvx512) wider = {VectorIsa::kAvx2, VectorIsa::kAvx512};
  if (cpu::cpu_vector_isa() == VectorIsa::kAvx2) wider = {VectorIsa::kAvx2};
  if (wider.empty()) GTEST_SKIP() << "this CPU has only the baseline vector ISA: nothing to compare";
  for (DType dtype : {kFloat32, kBFloat16}) {
    for (const Workload& w : workloads()) {
      TensorList inputs;
      manual_seed(1);
      for (const Shape& s : w.shapes) inputs.push_back((randn(s) * 3.0).to(dtype));
      TensorList base;
      {
        VectorIsaGuard guard(VectorIsa::kBaseline);
        base = outputs_and_grads(w.f, inputs);
      }
      for (VectorIsa isa : wider) {
        VectorIsaGuard guard(isa);
        const TensorList got = outputs_and_grads(w.f, inputs);
        ASSERT_EQ(got.size(), base.size());
        for (size_t i = 0; i < got.size(); ++i)
          EXPECT_TRUE(same_bytes(got[i], base[i])) << w.name << " " << dtype_name(dtype) << " under " << isa_name(isa)
                                                   << (i == 0 ? ": output" : ": gradient of input " + std::to_string(i - 1));
      }
    }
  }
}

// The parameters after three steps of an optimizer (Adam or SGD, with options) on gradients that
// differ per step; the first makes the optimizer's state.
template <typename Optimizer, typename Options>
TensorList optimizer_steps(const Options& options) {
  manual_seed(3);
  TensorList params{randn({1000}), randn({37, 5})};
  for (Tensor& p : params) p.requires_grad_();
  Optimizer opt(params, options);
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    Tensor loss = zeros({});
    for (const Tensor& p : params) loss = loss + (p * randn(p.sizes())).sum() + (p * p).sum();
    loss.backward();
    opt.step();
  }
  return params;
}

TEST(VectorIsaTest, AdamStepsGiveTheBaselinesBits) {
  if (cpu::cpu_vector_isa() == VectorIsa::kBaseline) GTEST_SKIP() << "this CPU has only the baseline vector ISA";
  optim::AdamOptions adamw;
  adamw.weight_decay = 0.1;
  adamw.decoupled_weight_decay = true;
  optim::AdamOptions amsgrad;
  amsgrad.amsgrad = true;
  amsgrad.maximize = true;
  amsgrad.weight_decay = 0.01;
  for (const optim::AdamOptions& options : {optim::AdamOptions{}, adamw, amsgrad}) {
    TensorList base;
    {
      VectorIsaGuard guard(VectorIsa::kBaseline);
      base = optimizer_steps<optim::Adam>(options);
    }
    const TensorList got = optimizer_steps<optim::Adam>(options);
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(same_bytes(got[i].detach(), base[i].detach()))
          << "amsgrad " << options.amsgrad << " weight decay " << options.weight_decay << ", parameter " << i;
  }
}

TEST(VectorIsaTest, SgdStepsGiveTheBaselinesBits) {
  if (cpu::cpu_vector_isa() == VectorIsa::kBaseline) GTEST_SKIP() << "this CPU has only the baseline vector ISA";
  std::vector<optim::SgdOptions> cases(5);
  cases[0].lr = 0.1;  // plain
  cases[1].momentum = 0.9;
  cases[2].momentum = 0.9, cases[2].nesterov = true, cases[2].weight_decay = 0.01;
  cases[3].momentum = 0.8, cases[3].dampening = 0.1, cases[3].maximize = true;
  cases[4].weight_decay = 0.1, cases[4].maximize = true;  // decay without momentum
  for (size_t c = 0; c < cases.size(); ++c) {
    TensorList base;
    {
      VectorIsaGuard guard(VectorIsa::kBaseline);
      base = optimizer_steps<optim::SGD>(cases[c]);
    }
    const TensorList got = optimizer_steps<optim::SGD>(cases[c]);
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(same_bytes(got[i].detach(), base[i].detach())) << "case " << c << ", parameter " << i;
  }
}

// Random draws (uniform, normal, integers, Bernoulli through dropout, in float32, bfloat16 and
// float64) for a fixed seed.
TensorList draws() {
  manual_seed(11);
  const Tensor x = ones({3000});
  return {rand({3001}), randn({3001}), randn({1001}).to(kBFloat16), rand({999}, TensorOptions(kFloat64)),
          randn({1003}, TensorOptions(kFloat64)), randint(-5, 1000, {777}), dropout(x, 0.3, true)};
}

// Only AVX-512 has a draw loop of its own: below it the draws take the FMA or the plain path whatever
// the ISA is set to, so there is nothing to compare on other CPUs.
TEST(VectorIsaTest, RandomDrawsGiveTheBaselinesBits) {
  if (cpu::cpu_vector_isa() != VectorIsa::kAvx512) GTEST_SKIP() << "this CPU has no AVX-512 draw loop to compare";
  TensorList base;
  {
    VectorIsaGuard guard(VectorIsa::kBaseline);
    base = draws();
  }
  const TensorList got = draws();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(same_bytes(got[i], base[i])) << "draw " << i;
}

TEST(VectorIsaTest, NoIsaWiderThanTheCpusCanBeSet) {
  const VectorIsa widest = cpu::cpu_vector_isa();
  EXPECT_EQ(cpu::vector_isa(), widest);
  if (widest != VectorIsa::kAvx512) {
    EXPECT_FALSE(cpu::set_vector_isa(VectorIsa::kAvx512));
  }
  EXPECT_TRUE(cpu::set_vector_isa(VectorIsa::kBaseline));
  EXPECT_EQ(cpu::vector_isa(), VectorIsa::kBaseline);
  EXPECT_TRUE(cpu::set_vector_isa(widest));
  EXPECT_EQ(cpu::vector_isa(), widest);
}

}  // namespace
}  // namespace rtx::testing
