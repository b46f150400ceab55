// Trains a small MLP with the C++ API on a synthetic task: classifying points of three interleaved
// spirals. Everything (data, model, SGD with momentum) is written with public rtx ops.
//
//   train_mlp [--steps N] [--lr X] [--seed S] [--hidden H] [--target-loss L]
//
// Prints a progress line every 100 steps and exits with status 1 when the final training loss is
// above the target (default 0.15), so it doubles as an end-to-end check.
#include <rtx/rtx.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Options {
  int64_t steps = 1500;
  double lr = 0.1;
  uint64_t seed = 0;
  int64_t hidden = 64;
  double target_loss = 0.15;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--steps" && has_value) o.steps = std::atoll(argv[++i]);
    else if (a == "--lr" && has_value) o.lr = std::atof(argv[++i]);
    else if (a == "--seed" && has_value) o.seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--hidden" && has_value) o.hidden = std::atoll(argv[++i]);
    else if (a == "--target-loss" && has_value) o.target_loss = std::atof(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--steps N] [--lr X] [--seed S] [--hidden H] [--target-loss L]\n", argv[0]);
      std::exit(a == "--help" || a == "-h" ? 0 : 2);
    }
  }
  return o;
}

// Three spiral arms of n points each, with a little noise: x [3n, 2] float32, y [3n] int64.
std::pair<rtx::Tensor, rtx::Tensor> make_spirals(int64_t n) {
  using namespace rtx;
  const Tensor r = linspace(0.0, 1.0, n);
  TensorList xs, ys;
  for (int64_t c = 0; c < 3; ++c) {
    const Tensor theta = r * 4.0 + static_cast<double>(c) * 2.0943951 + randn({n}) * 0.2;
    xs.push_back(stack({r * sin(theta), r * cos(theta)}, 1));
    ys.push_back(full({n}, c, kInt64));
  }
  return {cat(xs), cat(ys)};
}

// He-initialized weight [out, in] and zero bias [out], both leaves that require grad.
std::pair<rtx::Tensor, rtx::Tensor> make_layer(int64_t in, int64_t out) {
  rtx::Tensor w = (rtx::randn({out, in}) * std::sqrt(2.0 / static_cast<double>(in))).requires_grad_();
  rtx::Tensor b = rtx::zeros({out}).requires_grad_();
  return {w, b};
}

}  // namespace

int main(int argc, char** argv) {
  using namespace rtx;
  const Options opt = parse(argc, argv);
  manual_seed(opt.seed);

  const auto [x, y] = make_spirals(300);
  const auto [w1, b1] = make_layer(2, opt.hidden);
  const auto [w2, b2] = make_layer(opt.hidden, opt.hidden);
  const auto [w3, b3] = make_layer(opt.hidden, 3);
  TensorList params{w1, b1, w2, b2, w3, b3};
  TensorList velocity;
  for (const auto& p : params) velocity.push_back(zeros_like(p));

  auto forward = [&](const Tensor& input) {
    Tensor h = relu(linear(input, w1, b1));
    h = relu(linear(h, w2, b2));
    return linear(h, w3, b3);
  };

  std::printf("training a %lld-%lld-%lld-3 MLP on %lld spiral points for %lld steps (lr %.3g, momentum 0.9)\n",
              2LL, static_cast<long long>(opt.hidden), static_cast<long long>(opt.hidden),
              static_cast<long long>(x.size(0)), static_cast<long long>(opt.steps), opt.lr);
  const auto start = std::chrono::steady_clock::now();
  double loss_value = 0.0;
  for (int64_t step = 1; step <= opt.steps; ++step) {
    Tensor loss = cross_entropy(forward(x), y);
    for (auto& p : params) p.set_grad(Tensor());
    loss.backward();
    {
      NoGradGuard no_grad;
      for (size_t i = 0; i < params.size(); ++i) {
        velocity[i].mul_(0.9).add_(params[i].grad());
        params[i].sub_(velocity[i] * opt.lr);
      }
    }
    loss_value = loss.item<double>();
    if (step % 100 == 0 || step == opt.steps) {
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("step %5lld  loss %.4f  %.0f steps/s\n", static_cast<long long>(step), loss_value,
                  static_cast<double>(step) / secs);
    }
  }
  double accuracy;
  {
    NoGradGuard no_grad;
    accuracy = (argmax(forward(x), 1) == y).to(kFloat32).mean().item<double>();
  }
  std::printf("final loss %.4f, training accuracy %.1f%% (target loss %.3g)\n", loss_value, 100.0 * accuracy,
              opt.target_loss);
  return loss_value <= opt.target_loss ? 0 : 1;
}
