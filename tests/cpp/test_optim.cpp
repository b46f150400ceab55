// Tests of rtx::optim: sgd_update and adam_update against hand-written float64 loops of PyTorch's rules
// over several steps (momentum, dampening, Nesterov, weight decay, maximize, bias correction, AdamW's
// decoupled decay, AMSGrad), the optimizer classes against the same loops, parameter groups and
// learning rates, state_dict continuation bit for bit, and the errors for bad options and arguments.
// The multi-tensor updates against the one-parameter functions, bit for bit, on many parameters of odd
// sizes (more than one CUDA launch holds, one larger than a chunk), with step counts on the host or in
// tensors, a tensor learning rate, gradient scales, found_inf and float32 master weights.
#include <cmath>
#include <cstdint>
#include <vector>

#include "test_utils.h"

namespace rtx::testing {
namespace {

using optim::AdamOptions;
using optim::SgdOptions;

class OptimTest : public DeviceTest {};
INSTANTIATE_DEVICE_TESTS(OptimTest);

constexpr int64_t kSize = 7;
constexpr int kSteps = 6;

std::vector<double> initial_param() { return smooth(kSize, 11); }
std::vector<double> grad_at(int step) { return smooth(kSize, 100 + static_cast<uint64_t>(step)); }

// ---- float64 references (PyTorch's update rules, element by element) -------------------------------

std::vector<double> ref_sgd(const SgdOptions& o, int steps) {
  std::vector<double> p = initial_param(), buf;
  for (int s = 0; s < steps; ++s) {
    const std::vector<double> grad = grad_at(s);
    const bool first = buf.empty();
    if (first && o.momentum != 0) buf.assign(kSize, 0.0);
    for (int64_t i = 0; i < kSize; ++i) {
      double d = (o.maximize ? -grad[i] : grad[i]) + o.weight_decay * p[i];
      if (o.momentum != 0) {
        buf[i] = first ? d : o.momentum * buf[i] + (1 - o.dampening) * d;
        d = o.nesterov ? d + o.momentum * buf[i] : buf[i];
      }
      p[i] -= o.lr * d;
    }
  }
  return p;
}

std::vector<double> ref_adam(const AdamOptions& o, int steps) {
  std::vector<double> p = initial_param(), m(kSize, 0.0), v(kSize, 0.0), vmax(kSize, 0.0);
  const auto [b1, b2] = o.betas;
  for (int t = 1; t <= steps; ++t) {
    const std::vector<double> grad = grad_at(t - 1);
    for (int64_t i = 0; i < kSize; ++i) {
      double g = o.maximize ? -grad[i] : grad[i];
      if (o.decoupled_weight_decay)
        p[i] *= 1 - o.lr * o.weight_decay;
      else
        g += o.weight_decay * p[i];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      vmax[i] = std::max(vmax[i], v[i]);
      const double second = o.amsgrad ? vmax[i] : v[i];
      const double denom = std::sqrt(second) / std::sqrt(1 - std::pow(b2, t)) + o.eps;
      p[i] -= o.lr / (1 - std::pow(b1, t)) * m[i] / denom;
    }
  }
  return p;
}

Tensor param_on(Device dev, DType dtype = kFloat64) { return make(initial_param(), {kSize}, dev, dtype).requires_grad_(); }
Tensor grad_on(int step, Device dev, DType dtype = kFloat64) { return make(grad_at(step), {kSize}, dev, dtype); }

std::vector<SgdOptions> sgd_cases() {
  std::vector<SgdOptions> cases(6);
  cases[0] = {0.1};
  cases[1] = {0.1, 0.9};
  cases[2] = {0.05, 0.8, 0.3, 0.01};
  cases[3] = {0.1, 0.9, 0.0, 0.02, /*nesterov=*/true};
  cases[4] = {0.1, 0.5, 0.0, 0.0, false, /*maximize=*/true};
  cases[5] = {0.02, 0.0, 0.0, 0.1};
  return cases;
}

std::vector<AdamOptions> adam_cases() {
  std::vector<AdamOptions> cases(6);
  cases[0] = {0.01};
  cases[1] = {0.02, {0.8, 0.95}, 1e-6, 0.1};                      // L2 weight decay through the gradient
  cases[2] = {0.02, {0.9, 0.99}, 1e-8, 0.1, /*decoupled=*/true};  // AdamW
  cases[3] = {0.02, {0.9, 0.99}, 1e-8, 0.01, true, /*amsgrad=*/true};
  cases[4] = {0.01, {0.9, 0.999}, 1e-8, 0.0, false, true, /*maximize=*/true};
  cases[5] = {0.05, {0.5, 0.6}, 1e-3, 0.0, false, true};  // AMSGrad with fast decay: the max matters
  return cases;
}

// ---- update functions ------------------------------------------------------------------------------

TEST_P(OptimTest, SgdUpdateMatchesReference) {
  for (const SgdOptions& o : sgd_cases()) {
    Tensor p = param_on(dev()), buf;
    for (int s = 0; s < kSteps; ++s) optim::sgd_update(p, grad_on(s, dev()), buf, o);
    EXPECT_TRUE(all_close(p, make(ref_sgd(o, kSteps), {kSize}), 1e-12, 1e-14))
        << "momentum " << o.momentum << " dampening " << o.dampening << " nesterov " << o.nesterov;
    EXPECT_EQ(buf.defined(), o.momentum != 0);
    EXPECT_TRUE(p.is_leaf() && p.requires_grad());
  }
}

TEST_P(OptimTest, AdamUpdateMatchesReference) {
  for (const AdamOptions& o : adam_cases()) {
    Tensor p = param_on(dev()), m, v, vmax;
    for (int t = 1; t <= kSteps; ++t) optim::adam_update(p, grad_on(t - 1, dev()), m, v, vmax, t, o);
    EXPECT_TRUE(all_close(p, make(ref_adam(o, kSteps), {kSize}), 1e-11, 1e-14))
        << "weight_decay " << o.weight_decay << " decoupled " << o.decoupled_weight_decay << " amsgrad " << o.amsgrad;
    EXPECT_TRUE(m.defined() && v.defined());
    EXPECT_EQ(vmax.defined(), o.amsgrad);
    // A strided parameter and gradient (columns of a matrix) take the unfused path: the same rule.
    const auto column = [&](const std::vector<double>& x) {
      std::vector<double> two_columns;
      for (double e : x) two_columns.insert(two_columns.end(), {e, -1.0});
      return make(two_columns, {kSize, 2}, dev()).select(1, 0);
    };
    Tensor strided = column(initial_param()), sm, sv, svmax;
    for (int t = 1; t <= kSteps; ++t) optim::adam_update(strided, column(grad_at(t - 1)), sm, sv, svmax, t, o);
    EXPECT_FALSE(strided.is_contiguous());
    EXPECT_TRUE(all_close(strided, make(ref_adam(o, kSteps), {kSize}), 1e-11, 1e-14)) << "strided";
  }
}

TEST_P(OptimTest, Float32UpdatesFollowTheFloat64Reference) {
  Tensor p = param_on(dev(), kFloat32), buf;
  const SgdOptions sgd{0.1, 0.9, 0.0, 0.01, true};
  for (int s = 0; s < kSteps; ++s) optim::sgd_update(p, grad_on(s, dev(), kFloat32), buf, sgd);
  EXPECT_EQ(p.dtype(), kFloat32);
  EXPECT_TRUE(all_close(p, make(ref_sgd(sgd, kSteps), {kSize}), 1e-5, 1e-5));

  Tensor q = param_on(dev(), kFloat32), m, v, vmax;
  const AdamOptions adam = adam_cases()[3];
  for (int t = 1; t <= kSteps; ++t) optim::adam_update(q, grad_on(t - 1, dev(), kFloat32), m, v, vmax, t, adam);
  EXPECT_EQ(m.dtype(), kFloat32);
  EXPECT_TRUE(all_close(q, make(ref_adam(adam, kSteps), {kSize}), 1e-5, 1e-5));
}

TEST(OptimUpdate, TheGradientIsNotModified) {
  Tensor p = param_on(Device(kCPU)), buf, m, v, vmax;
  const Tensor g = grad_on(0, Device(kCPU));
  const Tensor before = g.clone();
  optim::sgd_update(p, g, buf, {0.1, 0.9});  // the first buffer is a copy of the gradient, not the gradient
  EXPECT_FALSE(buf.shares_storage(g));
  optim::sgd_update(p, g, buf, {0.1, 0.9, 0.0, 0.1, false, true});
  optim::adam_update(p, g, m, v, vmax, 1, {0.1, {0.9, 0.99}, 1e-8, 0.1, false, true, true});
  EXPECT_TRUE(same_bytes(g, before));
}

TEST(OptimUpdate, BadArgumentsRaise) {
  Tensor p = param_on(Device(kCPU)), buf, m, v, vmax;
  Tensor wrong_shape = zeros({kSize + 1}, kFloat64);
  EXPECT_TRUE(throws<ShapeError>([&] { optim::sgd_update(p, wrong_shape, buf, {}); }, "gradient shape [8]"));
  EXPECT_TRUE(throws<DTypeError>([&] { optim::sgd_update(p, zeros({kSize}, kFloat32), buf, {}); },
                                 "gradient dtype float32"));
  EXPECT_TRUE(throws<ValueError>([&] { optim::adam_update(p, grad_on(0, Device(kCPU)), m, v, vmax, 0, {}); },
                                 "at least 1, got 0"));
  Tensor bad_state = zeros({3}, kFloat64);
  EXPECT_TRUE(throws<ShapeError>([&] { optim::adam_update(p, grad_on(0, Device(kCPU)), bad_state, v, vmax, 1, {}); },
                                 "exp_avg shape [3]"));
}

// ---- options ---------------------------------------------------------------------------------------

TEST(OptimOptions, BadOptionsRaiseValueError) {
  Tensor p = param_on(Device(kCPU)), buf, m, v, vmax;
  const Tensor g = grad_on(0, Device(kCPU));
  EXPECT_TRUE(throws<ValueError>([&] { optim::SGD({p}, SgdOptions{-0.1}); }, "lr=-0.1"));
  EXPECT_TRUE(throws<ValueError>([&] { optim::SGD({p}, SgdOptions{0.1, -0.5}); }, "momentum=-0.5"));
  EXPECT_TRUE(throws<ValueError>([&] { optim::SGD({p}, SgdOptions{0.1, 0.9, 0.1, 0.0, true}); }, "nesterov"));
  EXPECT_TRUE(throws<ValueError>([&] { optim::SGD({p}, SgdOptions{0.1, 0.0, 0.0, 0.0, true}); }, "nesterov"));
  EXPECT_TRUE(throws<ValueError>([&] { optim::SGD({p}, SgdOptions{0.1, 0.0, 0.0, -1.0}); }, "weight_decay=-1"));
  EXPECT_TRUE(throws<ValueError>([&] { optim::sgd_update(p, g, buf, SgdOptions{0.1, 0.0, 2.0}); }, "dampening"));
  EXPECT_TRUE(throws<ValueError>([&] { optim::Adam({p}, AdamOptions{0.1, {1.0, 0.999}}); }, "beta1"));
  EXPECT_TRUE(throws<ValueError>([&] { optim::Adam({p}, AdamOptions{0.1, {0.9, -0.1}}); }, "beta2"));
  EXPECT_TRUE(throws<ValueError>([&] { optim::AdamW({p}, AdamOptions{0.1, {0.9, 0.99}, -1e-8}); }, "eps"));
  EXPECT_TRUE(throws<ValueError>([&] { optim::adam_update(p, g, m, v, vmax, 1, AdamOptions{std::nan("")}); },
                                 "learning rate"));
  optim::Adam adam({p});
  EXPECT_TRUE(throws<ValueError>([&] { adam.set_lr(-1.0); }, "lr=-1"));
  EXPECT_DOUBLE_EQ(adam.lr(), 1e-3);
  EXPECT_TRUE(throws<IndexError>([&] { adam.set_lr(3, 0.1); }, "group 3"));
}

TEST(OptimOptions, AdamWDefaultsAndDecoupling) {
  Tensor p = param_on(Device(kCPU));
  optim::AdamW adamw({p});
  EXPECT_DOUBLE_EQ(adamw.options().weight_decay, 1e-2);
  EXPECT_TRUE(adamw.options().decoupled_weight_decay);
  optim::AdamW given({p}, AdamOptions{0.02, {0.9, 0.99}, 1e-8, 0.1});
  EXPECT_TRUE(given.options().decoupled_weight_decay);
  EXPECT_FALSE(optim::Adam({p}).options().decoupled_weight_decay);
}

// ---- optimizer classes -----------------------------------------------------------------------------

template <typename Opt, typename Options>
Tensor run_optimizer(const Options& o, Device dev, int steps) {
  Tensor p = param_on(dev);
  Opt opt({p}, o);
  for (int s = 0; s < steps; ++s) {
    opt.zero_grad();
    p.set_grad(grad_on(s, dev));
    opt.step();
  }
  return p;
}

TEST_P(OptimTest, OptimizersMatchReference) {
  for (const SgdOptions& o : sgd_cases())
    EXPECT_TRUE(all_close(run_optimizer<optim::SGD>(o, dev(), kSteps), make(ref_sgd(o, kSteps), {kSize}), 1e-12, 1e-14));
  for (const AdamOptions& o : adam_cases()) {
    const Tensor expected = make(ref_adam(o, kSteps), {kSize});
    if (o.decoupled_weight_decay)
      EXPECT_TRUE(all_close(run_optimizer<optim::AdamW>(o, dev(), kSteps), expected, 1e-11, 1e-14));
    else
      EXPECT_TRUE(all_close(run_optimizer<optim::Adam>(o, dev(), kSteps), expected, 1e-11, 1e-14));
  }
}

TEST(OptimClasses, StateUsesPyTorchNamesAndStepCounts) {
  Tensor p = param_on(Device(kCPU));
  optim::Adam adam({p}, AdamOptions{0.01, {0.9, 0.99}, 1e-8, 0.0, false, true});
  for (int s = 0; s < 3; ++s) {
    p.set_grad(grad_on(s, Device(kCPU)));
    adam.step();
  }
  const optim::ParamState& st = adam.state(p);
  EXPECT_EQ(st.step, 3);
  EXPECT_EQ(st.tensors.size(), 3u);
  EXPECT_TRUE(st.tensors.count("exp_avg") && st.tensors.count("exp_avg_sq") && st.tensors.count("max_exp_avg_sq"));
  EXPECT_FALSE(st.tensors.at("exp_avg").requires_grad());

  Tensor q = param_on(Device(kCPU));
  optim::SGD sgd({q}, SgdOptions{0.1, 0.9});
  q.set_grad(grad_on(0, Device(kCPU)));
  sgd.step();
  EXPECT_EQ(sgd.state(q).tensors.count("momentum_buffer"), 1u);
  EXPECT_TRUE(throws<ValueError>([&] { sgd.state(p); }, "not a parameter of this optimizer"));
}

TEST(OptimClasses, ParamGroupsHaveTheirOwnOptions) {
  Tensor a = ones({2}, kFloat64).requires_grad_(), b = ones({2}, kFloat64).requires_grad_();
  Tensor c = ones({2}, kFloat64).requires_grad_();
  optim::SGD opt({{{a}, SgdOptions{0.1}}, {{b}, SgdOptions{1.0}}});
  opt.add_param_group({{c}, SgdOptions{0.5}});
  ASSERT_EQ(opt.num_param_groups(), 3u);
  for (Tensor* t : {&a, &b, &c}) t->set_grad(ones({2}, kFloat64));
  opt.step();
  EXPECT_EQ(values(a), (std::vector<double>{0.9, 0.9}));
  EXPECT_EQ(values(b), (std::vector<double>{0.0, 0.0}));
  EXPECT_EQ(values(c), (std::vector<double>{0.5, 0.5}));

  opt.set_lr(2.0);
  EXPECT_DOUBLE_EQ(opt.lr(0), 2.0);
  EXPECT_DOUBLE_EQ(opt.lr(2), 2.0);
  opt.set_lr(1, 0.25);
  EXPECT_DOUBLE_EQ(opt.lr(1), 0.25);

  // Parameters without a gradient are skipped; zero_grad leaves every gradient undefined.
  opt.zero_grad();
  EXPECT_FALSE(a.grad().defined() || b.grad().defined() || c.grad().defined());
  b.set_grad(ones({2}, kFloat64));
  opt.step();
  EXPECT_EQ(values(a), (std::vector<double>{0.9, 0.9}));
  EXPECT_EQ(values(b), (std::vector<double>{-0.25, -0.25}));

  // An optimizer is usable through the common interface.
  optim::Optimizer& any = opt;
  any.set_lr(0, 0.125);
  EXPECT_DOUBLE_EQ(any.lr(0), 0.125);
}

TEST(OptimClasses, BadParameterListsRaise) {
  Tensor p = param_on(Device(kCPU));
  EXPECT_TRUE(throws<ValueError>([&] { optim::SGD(TensorList{}); }, "[SGD] got an empty parameter list"));
  EXPECT_TRUE(throws<ValueError>([&] { optim::Adam({p, p}); }, "appears more than once"));
  EXPECT_TRUE(throws<ValueError>([&] { optim::SGD({zeros({2}, kFloat64)}); }, "must be a leaf that requires grad"));
  EXPECT_TRUE(throws<DTypeError>([&] { optim::SGD({zeros({2}, kInt64)}); }, "dtype int64"));
  optim::SGD opt({p});
  EXPECT_TRUE(throws<ValueError>([&] { opt.add_param_group({{p}, SgdOptions{}}); }, "appears more than once"));
}

// ---- state dicts -----------------------------------------------------------------------------------

// Steps 0..steps-1 of opt on p, from the given step on.
template <typename Opt>
void run_steps(Opt& opt, Tensor& p, Device dev, int from, int to) {
  for (int s = from; s < to; ++s) {
    opt.zero_grad();
    p.set_grad(grad_on(s, dev));
    opt.step();
  }
}

template <typename Opt, typename Options>
void expect_resume_is_bit_identical(const Options& o, Device dev) {
  Tensor full = param_on(dev);
  Opt uninterrupted({full}, o);
  run_steps(uninterrupted, full, dev, 0, kSteps);

  Tensor p = param_on(dev);
  Opt first({p}, o);
  run_steps(first, p, dev, 0, kSteps / 2);
  const auto saved = first.state_dict();
  run_steps(first, p, dev, kSteps / 2, kSteps);  // the saved copy does not follow later steps

  Tensor resumed = param_on(dev);
  Opt replay({resumed}, o);
  run_steps(replay, resumed, dev, 0, kSteps / 2);
  Opt second({resumed}, Options{});
  second.load_state_dict(saved);
  run_steps(second, resumed, dev, kSteps / 2, kSteps);
  EXPECT_TRUE(same_bytes(resumed, full));
  EXPECT_TRUE(same_bytes(p, full));
  EXPECT_DOUBLE_EQ(second.lr(), o.lr);
}

TEST_P(OptimTest, StateDictContinuationIsBitIdentical) {
  expect_resume_is_bit_identical<optim::SGD>(SgdOptions{0.1, 0.9, 0.0, 0.01, true}, dev());
  expect_resume_is_bit_identical<optim::SGD>(SgdOptions{0.05, 0.8, 0.2}, dev());
  expect_resume_is_bit_identical<optim::Adam>(adam_cases()[1], dev());
  expect_resume_is_bit_identical<optim::AdamW>(adam_cases()[3], dev());
}

TEST(OptimStateDict, LoadStateDictChecksGroupsAndShapes) {
  Tensor a = param_on(Device(kCPU)), b = param_on(Device(kCPU));
  optim::Adam two({a, b});
  a.set_grad(grad_on(0, Device(kCPU)));
  b.set_grad(grad_on(1, Device(kCPU)));
  two.step();
  const auto saved = two.state_dict();
  ASSERT_EQ(saved.param_groups.size(), 1u);
  EXPECT_EQ(saved.param_groups[0].num_params, 2u);
  ASSERT_EQ(saved.state.size(), 2u);
  EXPECT_EQ(saved.state[1].step, 1);

  Tensor c = param_on(Device(kCPU));
  optim::Adam one({c});
  EXPECT_TRUE(throws<ValueError>([&] { one.load_state_dict(saved); }, "sizes [2] but this optimizer's have [1]"));

  Tensor d = zeros({3}, kFloat64).requires_grad_(), e = zeros({3}, kFloat64).requires_grad_();
  optim::Adam other({d, e});
  EXPECT_TRUE(throws<ShapeError>([&] { other.load_state_dict(saved); }, "has shape [7] but the parameter has shape [3]"));
  EXPECT_EQ(other.state(d).step, 0);  // nothing loaded after the error
}

// ---- multi-tensor updates --------------------------------------------------------------------------

// 40 parameters: more than one CUDA launch holds, one larger than a chunk (65536 elements), one empty.
std::vector<int64_t> multi_sizes() {
  std::vector<int64_t> out;
  for (int i = 0; i < 40; ++i) out.push_back(1 + (i * 53) % 257);
  out[7] = 70001;
  out[12] = 0;
  return out;
}

TensorList multi_params(Device dev, DType dtype) {
  TensorList out;
  const std::vector<int64_t> ns = multi_sizes();
  for (size_t i = 0; i < ns.size(); ++i)
    out.push_back(make(smooth(ns[i], 300 + i), {ns[i]}, dev, dtype).requires_grad_());
  return out;
}

// The parameters that have a gradient at a step (some skip steps, so that step counts and momentum
// buffers differ between parameters) and their gradients.
std::vector<size_t> with_grad_at(int step) {
  std::vector<size_t> out;
  for (size_t i = 0; i < multi_sizes().size(); ++i)
    if ((i + static_cast<size_t>(step)) % 5 != 0) out.push_back(i);
  return out;
}
Tensor multi_grad(size_t i, int step, Device dev, DType dtype) {
  const int64_t n = multi_sizes()[i];
  return make(smooth(n, 5000 + 97 * static_cast<uint64_t>(step) + i), {n}, dev, dtype);
}

TensorList pick(const TensorList& all, const std::vector<size_t>& which) {
  TensorList out;
  for (size_t i : which) out.push_back(all[i]);
  return out;
}
void put(TensorList& all, const std::vector<size_t>& which, const TensorList& values) {
  for (size_t k = 0; k < which.size(); ++k) all[which[k]] = values[k];
}

::testing::AssertionResult all_same_bytes(const TensorList& a, const TensorList& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << a.size() << " != " << b.size() << " tensors";
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].defined() != b[i].defined()) return ::testing::AssertionFailure() << "tensor " << i << " defined differs";
    if (!a[i].defined()) continue;
    auto same = same_bytes(a[i], b[i]);
    if (!same) return same << " (tensor " << i << ")";
  }
  return ::testing::AssertionSuccess();
}

// Adam state of every parameter (undefined until its first step) and its step counts.
struct AdamRun {
  TensorList params, m, v, vmax, masters, step_tensors;
  std::vector<int64_t> steps;
  AdamRun(Device dev, DType dtype) : params(multi_params(dev, dtype)) {
    const size_t n = params.size();
    m.resize(n), v.resize(n), vmax.resize(n), masters.resize(n), step_tensors.resize(n);
    steps.assign(n, 0);
  }
};

enum class Steps { OneByOne, HostCounts, DeviceCounts };

void adam_steps(AdamRun& r, const AdamOptions& o, Steps how, Device dev, DType grad_dtype, int steps = 4) {
  for (int s = 0; s < steps; ++s) {
    const std::vector<size_t> which = with_grad_at(s);
    TensorList grads;
    for (size_t i : which) grads.push_back(multi_grad(i, s, dev, grad_dtype));
    if (how == Steps::OneByOne) {
      for (size_t k = 0; k < which.size(); ++k) {
        const size_t i = which[k];
        optim::adam_update(r.params[i], grads[k], r.m[i], r.v[i], r.vmax[i], ++r.steps[i], o);
      }
      continue;
    }
    TensorList m = pick(r.m, which), v = pick(r.v, which), vmax = pick(r.vmax, which), masters = pick(r.masters, which);
    const TensorList params = pick(r.params, which);
    if (how == Steps::HostCounts) {
      std::vector<int64_t> counts;
      for (size_t i : which) counts.push_back(r.steps[i]);
      optim::adam_update_multi(params, grads, m, v, vmax, masters, counts, o);
      for (size_t k = 0; k < which.size(); ++k) r.steps[which[k]] = counts[k];
    } else {
      TensorList counts = pick(r.step_tensors, which);
      optim::adam_update_multi(params, grads, m, v, vmax, masters, counts, o);
      put(r.step_tensors, which, counts);
    }
    put(r.m, which, m), put(r.v, which, v), put(r.vmax, which, vmax), put(r.masters, which, masters);
  }
}

TEST_P(OptimTest, MultiTensorAdamIsBitwiseThePerParameterUpdate) {
  for (DType dtype : {kFloat32, kFloat64}) {
    for (const AdamOptions& o : adam_cases()) {
      AdamRun one(dev(), dtype), host(dev(), dtype), device(dev(), dtype);
      adam_steps(one, o, Steps::OneByOne, dev(), dtype);
      adam_steps(host, o, Steps::HostCounts, dev(), dtype);
      adam_steps(device, o, Steps::DeviceCounts, dev(), dtype);
      for (const AdamRun* r : {&host, &device}) {
        EXPECT_TRUE(all_same_bytes(r->params, one.params)) << dtype << " amsgrad " << o.amsgrad;
        EXPECT_TRUE(all_same_bytes(r->m, one.m) && all_same_bytes(r->v, one.v) && all_same_bytes(r->vmax, one.vmax));
      }
      EXPECT_EQ(host.steps, one.steps);
      for (size_t i = 0; i < one.steps.size(); ++i) {
        ASSERT_EQ(device.step_tensors[i].defined(), one.steps[i] > 0);
        if (one.steps[i] > 0) {
          EXPECT_EQ(device.step_tensors[i].item<float>(), static_cast<float>(one.steps[i]));
        }
      }
    }
  }
}

TEST_P(OptimTest, MultiTensorAdamUpdatesNonContiguousParameters) {
  const AdamOptions o = adam_cases()[3];
  Tensor base = make(smooth(3 * 70001, 9), {70001, 3}, dev(), kFloat32);
  Tensor column = base.select(1, 1).requires_grad_(), dense = column.detach().contiguous().requires_grad_();
  TensorList m, v, vmax, masters, dm, dv, dvmax, dmasters;
  std::vector<int64_t> steps{0, 0}, dsteps{0, 0};
  const Tensor small = make(smooth(5, 2), {5}, dev(), kFloat32).requires_grad_(), small2 = small.detach().clone();
  for (int s = 0; s < 3; ++s) {
    const Tensor g = make(smooth(70001, 40 + s), {70001}, dev(), kFloat32);
    const Tensor gs = make(smooth(5, 60 + s), {5}, dev(), kFloat32);
    optim::adam_update_multi({column, small}, {g, gs}, m, v, vmax, masters, steps, o);
    optim::adam_update_multi({dense, small2}, {g, gs}, dm, dv, dvmax, dmasters, dsteps, o);
  }
  EXPECT_TRUE(same_bytes(column.contiguous(), dense));
  EXPECT_TRUE(same_bytes(small, small2));
  EXPECT_EQ(steps, (std::vector<int64_t>{3, 3}));
}

// Parameters that are contiguous views at odd offsets of one buffer (not aligned for the CUDA
// kernel's four-element vectors, so updated element by element) get the same update to the bit as
// aligned copies of them (updated four elements at a time), across chunk boundaries and tails.
TEST_P(OptimTest, MultiTensorAdamIsBitwiseTheSameForMisalignedParameters) {
  const std::vector<int64_t> ns{70001, 5, 131075};
  const int64_t total = 1 + 70001 + 5 + 131075;
  for (DType dtype : {kFloat32, kBFloat16}) {
    for (AdamOptions o : {adam_cases()[2], adam_cases()[3]}) {
      o.master_weights = dtype != kFloat32;
      const Tensor buffer = make(smooth(total, 77), {total}, dev(), dtype);
      TensorList odd, aligned;
      int64_t offset = 1;
      for (int64_t n : ns) {
        odd.push_back(buffer.narrow(0, offset, n).requires_grad_());
        aligned.push_back(odd.back().detach().clone().requires_grad_());
        offset += n;
      }
      TensorList m, v, vmax, masters, am, av, avmax, amasters;
      std::vector<int64_t> steps(ns.size(), 0), asteps(ns.size(), 0);
      for (int s = 0; s < 3; ++s) {
        TensorList grads;
        for (size_t i = 0; i < ns.size(); ++i)
          grads.push_back(make(smooth(ns[i], 90 + 7 * static_cast<uint64_t>(s) + i), {ns[i]}, dev(), dtype));
        optim::adam_update_multi(odd, grads, m, v, vmax, masters, steps, o);
        optim::adam_update_multi(aligned, grads, am, av, avmax, amasters, asteps, o);
      }
      EXPECT_TRUE(all_same_bytes(odd, aligned)) << dtype << " amsgrad " << o.amsgrad;
      EXPECT_TRUE(all_same_bytes(m, am) && all_same_bytes(v, av) && all_same_bytes(vmax, avmax)) << dtype;
      EXPECT_TRUE(all_same_bytes(masters, amasters)) << dtype;
    }
  }
}

TEST_P(OptimTest, MasterWeightsFollowTheFloat32Update) {
  for (DType low : {kBFloat16, kFloat16}) {
    AdamOptions o = adam_cases()[3];
    o.master_weights = true;
    AdamRun mixed(dev(), low), reference(dev(), kFloat32);
    for (Tensor& p : reference.params) p = p.detach().to(low).to(kFloat32).requires_grad_();  // the same start
    adam_steps(mixed, o, Steps::HostCounts, dev(), low);
    // The float32 run sees the same (16-bit) gradients.
    AdamOptions plain = o;
    plain.master_weights = false;
    for (int s = 0; s < 4; ++s) {
      const std::vector<size_t> which = with_grad_at(s);
      TensorList grads, m = pick(reference.m, which), v = pick(reference.v, which), vmax = pick(reference.vmax, which),
                        masters;
      std::vector<int64_t> counts;
      for (size_t i : which) {
        grads.push_back(multi_grad(i, s, dev(), low).to(kFloat32));
        counts.push_back(reference.steps[i]);
      }
      optim::adam_update_multi(pick(reference.params, which), grads, m, v, vmax, masters, counts, plain);
      put(reference.m, which, m), put(reference.v, which, v), put(reference.vmax, which, vmax);
      for (size_t k = 0; k < which.size(); ++k) reference.steps[which[k]] = counts[k];
    }
    for (size_t i = 0; i < mixed.params.size(); ++i) {
      ASSERT_TRUE(mixed.masters[i].defined()) << i;
      EXPECT_EQ(mixed.masters[i].dtype(), kFloat32);
      EXPECT_EQ(mixed.m[i].dtype(), kFloat32);
      EXPECT_TRUE(same_bytes(mixed.masters[i], reference.params[i])) << low << " parameter " << i;
      EXPECT_TRUE(same_bytes(mixed.m[i], reference.m[i]) && same_bytes(mixed.vmax[i], reference.vmax[i]));
      EXPECT_TRUE(same_bytes(mixed.params[i], mixed.masters[i].to(low))) << "the parameter is its master rounded";
    }
  }
}

TEST_P(OptimTest, DeviceScalarsScaleSkipAndSetTheLearningRate) {
  const AdamOptions o = adam_cases()[2];
  AdamRun plain(dev(), kFloat32), scaled(dev(), kFloat32);
  adam_steps(plain, o, Steps::DeviceCounts, dev(), kFloat32, 2);
  adam_steps(scaled, o, Steps::DeviceCounts, dev(), kFloat32, 2);
  const std::vector<size_t> which = with_grad_at(2);
  TensorList grads, scaled_grads;
  for (size_t i : which) {
    grads.push_back(multi_grad(i, 2, dev(), kFloat32));
    scaled_grads.push_back(grads.back() * 1024.0);
  }
  const auto step = [&](AdamRun& r, const TensorList& g, const AdamOptions& options, const optim::DeviceScalars& ds) {
    TensorList m = pick(r.m, which), v = pick(r.v, which), vmax = pick(r.vmax, which), masters,
               counts = pick(r.step_tensors, which);
    optim::adam_update_multi(pick(r.params, which), g, m, v, vmax, masters, counts, options, ds);
    put(r.m, which, m), put(r.v, which, v), put(r.step_tensors, which, counts);
  };
  // found_inf set: nothing changes, step counts included.
  const TensorList params_before = [&] {
    TensorList out;
    for (const Tensor& p : scaled.params) out.push_back(p.detach().clone());
    return out;
  }();
  const Tensor before_count = scaled.step_tensors[which[0]].clone();
  const TensorOptions f32(kFloat32, dev());
  step(scaled, scaled_grads, o, {Tensor(), full({}, 1024.0, f32), full({}, 1.0, f32)});
  EXPECT_TRUE(all_same_bytes(scaled.params, params_before));
  EXPECT_TRUE(same_bytes(scaled.step_tensors[which[0]], before_count));
  // A gradient scale (and a clear found_inf, and the learning rate as a tensor, here on the CPU) give the
  // unscaled step; the gradients are stored unscaled.
  AdamOptions other_lr = o;
  other_lr.lr = 1.0;  // not used: the tensor wins
  step(scaled, scaled_grads, other_lr,
       {full({}, o.lr, TensorOptions(kFloat64)), full({}, 1024.0, f32), full({}, 0.0, f32)});
  step(plain, grads, o, {});
  EXPECT_TRUE(all_same_bytes(scaled.params, plain.params));
  EXPECT_TRUE(all_same_bytes(scaled.step_tensors, plain.step_tensors));
  EXPECT_TRUE(all_same_bytes(scaled_grads, grads));
  // The learning rate as a float32 tensor on the parameters' device: its value, converted.
  const Tensor lr32 = full({1}, o.lr, TensorOptions(kFloat32, dev()));
  AdamOptions rounded_lr = o;
  rounded_lr.lr = lr32.item<double>();
  step(scaled, grads, other_lr, {lr32, Tensor(), Tensor()});
  step(plain, grads, rounded_lr, {});
  EXPECT_TRUE(all_same_bytes(scaled.params, plain.params));
}

TEST_P(OptimTest, MultiTensorSgdIsBitwiseThePerParameterUpdate) {
  for (SgdOptions o : sgd_cases()) {
    TensorList one = multi_params(dev(), kFloat32), multi = multi_params(dev(), kFloat32);
    TensorList one_buffers(one.size()), buffers(one.size());
    for (int s = 0; s < 4; ++s) {
      const std::vector<size_t> which = with_grad_at(s);
      TensorList grads;
      for (size_t i : which) grads.push_back(multi_grad(i, s, dev(), kFloat32));
      for (size_t k = 0; k < which.size(); ++k) optim::sgd_update(one[which[k]], grads[k], one_buffers[which[k]], o);
      TensorList b = pick(buffers, which), masters;
      optim::sgd_update_multi(pick(multi, which), grads, b, masters, o);
      put(buffers, which, b);
    }
    EXPECT_TRUE(all_same_bytes(multi, one)) << "momentum " << o.momentum << " nesterov " << o.nesterov;
    EXPECT_TRUE(all_same_bytes(buffers, one_buffers));
  }
}

TEST(OptimMulti, BadArgumentsRaise) {
  const Device cpu(kCPU);
  Tensor p = param_on(cpu), q = param_on(cpu);
  const Tensor g = grad_on(0, cpu);
  TensorList m, v, vmax, masters, step_tensors{zeros({}, kFloat64), Tensor()};
  std::vector<int64_t> steps{0, 0};
  const AdamOptions o;
  EXPECT_TRUE(throws<ValueError>([&] { optim::adam_update_multi({p, q}, {g}, m, v, vmax, masters, steps, o); },
                                 "[adam_update_multi] got 1 gradients for 2 parameters"));
  EXPECT_TRUE(throws<ValueError>(
      [&] {
        optim::adam_update_multi({p, q}, {g, g}, m, v, vmax, masters, steps, o,
                                 {Tensor(), Tensor(), zeros({}, kFloat32)});
      },
      "found_inf needs the step counts in tensors"));
  EXPECT_TRUE(throws<ValueError>(
      [&] { optim::adam_update_multi({p, q}, {g, g}, m, v, vmax, masters, step_tensors, o); },
      "step 0 must be a 1-element float32 tensor on cpu, got float64"));
  TensorList three(3);
  EXPECT_TRUE(throws<ValueError>([&] { optim::adam_update_multi({p, q}, {g, g}, three, v, vmax, masters, steps, o); },
                                 "exp_avgs has 3 entries for 2 parameters"));
  TensorList buffers, no_masters;
  EXPECT_TRUE(throws<ValueError>(
      [&] { optim::sgd_update_multi({p}, {g}, buffers, no_masters, SgdOptions{}, {Tensor(), zeros({2}, kFloat32), Tensor()}); },
      "[sgd_update_multi] grad_scale must hold one element"));
  EXPECT_TRUE(throws<DTypeError>(
      [&] { optim::sgd_update_multi({p}, {g}, buffers, no_masters, SgdOptions{}, {zeros({}, kInt64), Tensor(), Tensor()}); },
      "a tensor lr must be a float tensor"));
  SgdOptions with_masters;
  with_masters.master_weights = true;
  Tensor buf;
  EXPECT_TRUE(throws<ValueError>([&] { optim::sgd_update(p, g, buf, with_masters); }, "sgd_update_multi"));
  Tensor bad_master = zeros({kSize}, kFloat64), low = param_on(cpu, kBFloat16);
  TensorList bad_masters{bad_master};
  EXPECT_TRUE(throws<DTypeError>(
      [&] { optim::sgd_update_multi({low}, {grad_on(0, cpu, kBFloat16)}, buffers, bad_masters, with_masters); },
      "master_param dtype float64 does not match the state dtype float32"));
}

TEST(OptimClasses, MasterWeightsAreStateThatCheckpointsKeep) {
  const Device cpu(kCPU);
  AdamOptions o = optim::AdamW::default_options();
  o.master_weights = true;
  o.lr = 0.01;
  Tensor p = param_on(cpu, kBFloat16);
  optim::AdamW opt({p}, o);
  for (int s = 0; s < 2; ++s) {
    p.set_grad(grad_on(s, cpu, kBFloat16));
    opt.step();
  }
  const optim::ParamState& st = opt.state(p);
  ASSERT_TRUE(st.tensors.count("master_param"));
  EXPECT_EQ(st.tensors.at("master_param").dtype(), kFloat32);
  EXPECT_EQ(st.tensors.at("exp_avg").dtype(), kFloat32);
  EXPECT_TRUE(same_bytes(p, st.tensors.at("master_param").to(kBFloat16)));
  const auto saved = opt.state_dict();
  Tensor q = p.detach().clone().requires_grad_();
  optim::AdamW resumed({q});
  resumed.load_state_dict(saved);
  EXPECT_EQ(resumed.state(q).tensors.at("master_param").dtype(), kFloat32);
  EXPECT_EQ(resumed.state(q).tensors.at("exp_avg_sq").dtype(), kFloat32);
  p.set_grad(grad_on(2, cpu, kBFloat16));
  q.set_grad(grad_on(2, cpu, kBFloat16));
  opt.step();
  resumed.step();
  EXPECT_TRUE(same_bytes(q, p));
  EXPECT_TRUE(same_bytes(resumed.state(q).tensors.at("master_param"), opt.state(p).tensors.at("master_param")));
}

}  // namespace
}  // namespace rtx::testing
