// Parity of rtx's CUDA ops with PyTorch's on the same GPU. Every case draws its inputs once (rtx,
// seeded), mirrors them into libtorch, runs the op on both and, for floating dtypes, the backward of
// sum(out * g) with the same g, and compares values and input gradients. Built and run by
// `scripts/with_torch.sh tests/torch/parity.cpp` on a machine with a GPU and the torch wheel; prints
// one line per failing case and a summary, and exits non-zero when any case fails.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "rtx/rtx.h"

namespace {

using RtxFn = std::function<rtx::Tensor(const rtx::TensorList&)>;
using TorchFn = std::function<torch::Tensor(const std::vector<torch::Tensor>&)>;

// How an input is drawn: normal, positive (for log/sqrt), distinct (every row along the last dim a
// permutation of small integers, exact in every dtype: no ties, which libraries may order
// differently), or int64 indices in [0, high).
struct Input {
  rtx::Shape shape;
  enum Kind { Normal, Positive, Distinct, Index } kind = Normal;
  int64_t high = 0;
};

struct Case {
  std::string name;
  std::vector<Input> inputs;
  RtxFn ours;
  TorchFn theirs;
  bool differentiable = true;
  std::vector<rtx::DType> dtypes = {rtx::kFloat32, rtx::kFloat64, rtx::kBFloat16, rtx::kFloat16};
};

Input normal(rtx::Shape s) { return {std::move(s), Input::Normal, 0}; }
Input positive(rtx::Shape s) { return {std::move(s), Input::Positive, 0}; }
Input distinct(rtx::Shape s) { return {std::move(s), Input::Distinct, 0}; }
Input index(rtx::Shape s, int64_t high) { return {std::move(s), Input::Index, high}; }

torch::ScalarType torch_dtype(rtx::DType t) {
  switch (t) {
    case rtx::kFloat32: return torch::kFloat32;
    case rtx::kFloat64: return torch::kFloat64;
    case rtx::kFloat16: return torch::kFloat16;
    case rtx::kBFloat16: return torch::kBFloat16;
    case rtx::kInt64: return torch::kInt64;
    case rtx::kInt32: return torch::kInt32;
    case rtx::kBool: return torch::kBool;
    default: return torch::kFloat64;
  }
}

// The same values as a torch tensor on the GPU.
torch::Tensor mirror(const rtx::Tensor& t) {
  const rtx::Tensor host = t.cpu().contiguous();
  std::vector<int64_t> sizes(host.sizes().begin(), host.sizes().end());
  return torch::from_blob(host.data_ptr(), sizes, torch::TensorOptions().dtype(torch_dtype(host.dtype())))
      .clone()
      .to(torch::kCUDA);
}

std::vector<double> values(const rtx::Tensor& t) { return t.to(rtx::Device(rtx::kCPU), rtx::kFloat64).contiguous().tolist<double>(); }
std::vector<double> values(const torch::Tensor& t) {
  const torch::Tensor c = t.to(torch::kCPU, torch::kFloat64).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

double tolerance(rtx::DType t) {
  switch (t) {
    case rtx::kFloat16: return 2e-3;
    case rtx::kBFloat16: return 2e-2;
    case rtx::kFloat32: return 2e-5;
    default: return 1e-9;
  }
}

// ||a - e|| / max(||e||, 1e-30) over the finite elements; a NaN or infinity must match exactly (else
// the error is infinite); -1 for a shape mismatch.
double max_error(const std::vector<double>& a, const std::vector<double>& e) {
  if (a.size() != e.size()) return -1;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(e[i])) {
      const bool same = (std::isnan(a[i]) && std::isnan(e[i])) || a[i] == e[i];
      if (!same) return INFINITY;
      continue;
    }
    diff += (a[i] - e[i]) * (a[i] - e[i]);
    norm += e[i] * e[i];
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

int g_passed = 0;
int g_failed = 0;

void report(const std::string& what, double err, double tol) {
  if (err >= 0 && err <= tol) {
    ++g_passed;
    return;
  }
  ++g_failed;
  std::printf("FAIL %-40s error %.3g (tolerance %.3g)\n", what.c_str(), err, tol);
}

void run(const Case& c) {
  for (rtx::DType dtype : c.dtypes) {
    const std::string label = c.name + " " + rtx::dtype_name(dtype);
    try {
      rtx::TensorList ours_in;
      std::vector<torch::Tensor> theirs_in;
      for (const Input& in : c.inputs) {
        rtx::Tensor host;
        if (in.kind == Input::Index) {
          host = rtx::randint(0, in.high, in.shape);
        } else if (in.kind == Input::Distinct) {
          const int64_t last = in.shape.back();
          rtx::TensorList rows;
          for (int64_t r = 0; r < rtx::zeros(in.shape).numel() / last; ++r) rows.push_back(rtx::randperm(last));
          host = (rtx::stack(rows).to(rtx::kFloat64) - last / 2).view(in.shape).to(dtype);
        } else {
          host = rtx::randn(in.shape, rtx::TensorOptions(rtx::kFloat64));
          if (in.kind == Input::Positive) host = host.abs() + 0.5;
          host = host.to(dtype);
        }
        const bool grad = c.differentiable && in.kind != Input::Index;
        rtx::Tensor ours = host.cuda().detach();
        torch::Tensor theirs = mirror(host);
        if (grad) {
          ours.requires_grad_(true);
          theirs.requires_grad_(true);
        }
        ours_in.push_back(ours);
        theirs_in.push_back(theirs);
      }
      // torch on the same values in float32: a second reference wherever torch's own 16-bit result
      // has values that overflowed (e.g. a float16 sum of per-row losses) and ours does not match it.
      const bool half = dtype == rtx::kFloat16 || dtype == rtx::kBFloat16;
      std::vector<torch::Tensor> wide_in;
      for (const torch::Tensor& t : theirs_in)
        wide_in.push_back(t.is_floating_point() ? t.detach().to(torch::kFloat32).requires_grad_(t.requires_grad()) : t);
      const auto error = [&](const std::vector<double>& ours, const torch::Tensor& narrow, const torch::Tensor& wide) {
        const std::vector<double> e = values(narrow);
        const double err = max_error(ours, e);
        const bool overflowed = std::any_of(e.begin(), e.end(), [](double x) { return !std::isfinite(x); });
        if (std::isfinite(err) || !half || !wide.defined() || !overflowed) return err;
        std::printf("note %-40s torch %s overflows; compared with torch float32\n", label.c_str(),
                    rtx::dtype_name(dtype));
        return max_error(ours, values(wide));
      };
      const rtx::Tensor out = c.ours(ours_in);
      const torch::Tensor expected = c.theirs(theirs_in);
      const torch::Tensor expected_wide = half ? c.theirs(wide_in) : torch::Tensor();
      report(label, error(values(out), expected, expected_wide), tolerance(out.dtype()));
      if (!c.differentiable || !out.is_floating_point()) continue;
      const rtx::Tensor g = rtx::randn(out.sizes(), rtx::TensorOptions(rtx::kFloat64)).to(out.dtype());
      rtx::sum(out * g.cuda()).backward();
      (expected * mirror(g)).sum().backward();
      if (half) (expected_wide * mirror(g).to(torch::kFloat32)).sum().backward();
      for (size_t i = 0; i < ours_in.size(); ++i) {
        if (!ours_in[i].requires_grad()) continue;
        const std::string what = label + " grad" + std::to_string(i);
        if (!ours_in[i].grad().defined() || !theirs_in[i].grad().defined()) {
          report(what, ours_in[i].grad().defined() == theirs_in[i].grad().defined() ? 0 : -1, 0);
          continue;
        }
        // A gradient goes through more roundings than the value (and, for remainder, a floor whose
        // jumps low precision can move): twice the forward tolerance.
        report(what, error(values(ours_in[i].grad()), theirs_in[i].grad(), half ? wide_in[i].grad() : torch::Tensor()),
               2 * tolerance(dtype));
      }
    } catch (const std::exception& e) {
      ++g_failed;
      std::printf("FAIL %-40s raised: %s\n", label.c_str(), e.what());
    }
  }
}

std::vector<Case> cases() {
  using T = torch::Tensor;
  using R = rtx::Tensor;
  using TL = std::vector<T>;
  using RL = rtx::TensorList;
  std::vector<Case> all;
  const rtx::Shape s{67, 129};  // odd sizes: vector tails

  // Unary and binary ops straight from the op table (torch spells them the same way).
#define RTX_UNARY(name, F, rule, save, grad)                                                           \
  all.push_back({#name, {std::string(#name).find("log") == 0 || std::string(#name).find("sqrt") != std::string::npos || \
                                 std::string(#name) == "reciprocal"                                        \
                             ? positive(s)                                                             \
                             : normal(s)},                                                             \
                 [](const RL& x) { return rtx::name(x[0]); }, [](const TL& x) { return torch::name(x[0]); }});
#define RTX_BINARY(name, F, rule, save, ga, gb)                                                        \
  all.push_back({#name, {std::string(#name) == "pow" ? positive(s) : normal(s), normal({129})},      \
                 [](const RL& x) { return rtx::name(x[0], x[1]); },                                    \
                 [](const TL& x) { return torch::name(x[0], x[1]); },                                  \
                 std::string(#ga) != "ZERO"}); /* torch does not differentiate floor_divide */
#define RTX_COMPARE(name, F)                                                                           \
  all.push_back({#name, {normal(s), normal({129})}, [](const RL& x) { return rtx::name(x[0], x[1].round()); }, \
                 [](const TL& x) { return torch::name(x[0], x[1].round()); }, false});
#include "rtx/pointwise.def"

  all.push_back({"gelu", {normal(s)}, [](const RL& x) { return rtx::gelu(x[0]); },
                 [](const TL& x) { return torch::gelu(x[0]); }});
  all.push_back({"gelu_tanh", {normal(s)}, [](const RL& x) { return rtx::gelu(x[0], "tanh"); },
                 [](const TL& x) { return torch::gelu(x[0], "tanh"); }});
  all.push_back({"leaky_relu", {normal(s)}, [](const RL& x) { return rtx::leaky_relu(x[0], 0.2); },
                 [](const TL& x) { return torch::leaky_relu(x[0], 0.2); }});
  all.push_back({"elu", {normal(s)}, [](const RL& x) { return rtx::elu(x[0]); }, [](const TL& x) { return torch::elu(x[0]); }});
  all.push_back({"softplus", {normal(s)}, [](const RL& x) { return rtx::softplus(x[0]); },
                 [](const TL& x) { return torch::softplus(x[0]); }});
  all.push_back({"clamp", {normal(s)}, [](const RL& x) { return rtx::clamp(x[0], -0.5, 0.7); },
                 [](const TL& x) { return torch::clamp(x[0], -0.5, 0.7); }});
  all.push_back({"where", {normal(s), normal(s), normal({129})},
                 [](const RL& x) { return rtx::where(x[0] > 0, x[1], x[2]); },
                 [](const TL& x) { return torch::where(x[0] > 0, x[1], x[2]); }});
  all.push_back({"addcdiv", {normal(s), normal(s), positive(s)},
                 [](const RL& x) { return rtx::addcdiv(x[0], x[1], x[2], 0.5); },
                 [](const TL& x) { return torch::addcdiv(x[0], x[1], x[2], 0.5); }});
  all.push_back({"transpose_add", {normal(s), normal({129, 67})},
                 [](const RL& x) { return x[0] + x[1].t(); }, [](const TL& x) { return x[0] + x[1].t(); }});

  // Reductions.
  const rtx::Shape r{33, 70, 45};
  all.push_back({"sum_all", {normal(r)}, [](const RL& x) { return x[0].sum(); }, [](const TL& x) { return x[0].sum(); }});
  all.push_back({"sum_rows", {normal(r)}, [](const RL& x) { return x[0].sum({2}); },
                 [](const TL& x) { return x[0].sum(2); }});
  all.push_back({"sum_cols", {normal(r)}, [](const RL& x) { return x[0].sum({0}); },
                 [](const TL& x) { return x[0].sum(0); }});
  all.push_back({"mean_02", {normal(r)}, [](const RL& x) { return x[0].mean({0, 2}, true); },
                 [](const TL& x) { return x[0].mean(std::vector<int64_t>{0, 2}, true); }});
  all.push_back({"amax", {normal(r)}, [](const RL& x) { return rtx::amax(x[0], {1}); },
                 [](const TL& x) { return torch::amax(x[0], {1}); }});
  all.push_back({"var", {normal(r)}, [](const RL& x) { return rtx::var(x[0], {2}); },
                 [](const TL& x) { return torch::var(x[0], {2}); }});
  all.push_back({"norm", {normal(r)}, [](const RL& x) { return rtx::norm(x[0], 2.0, {1}); },
                 [](const TL& x) { return torch::norm(x[0], 2, {1}); }});
  all.push_back({"logsumexp", {normal(r)}, [](const RL& x) { return rtx::logsumexp(x[0], {2}); },
                 [](const TL& x) { return torch::logsumexp(x[0], {2}); }});
  all.push_back({"argmax", {distinct(r)}, [](const RL& x) { return rtx::argmax(x[0], 2); },
                 [](const TL& x) { return torch::argmax(x[0], 2); }, false});
  all.push_back({"cumsum", {normal(r)}, [](const RL& x) { return rtx::cumsum(x[0], 1); },
                 [](const TL& x) { return torch::cumsum(x[0], 1); }});

  // Neural network functions and losses.
  const rtx::Shape rows{64, 1000};
  all.push_back({"softmax", {normal(rows)}, [](const RL& x) { return rtx::softmax(x[0], 1); },
                 [](const TL& x) { return torch::softmax(x[0], 1); }});
  all.push_back({"log_softmax_dim0", {normal(rows)}, [](const RL& x) { return rtx::log_softmax(x[0], 0); },
                 [](const TL& x) { return torch::log_softmax(x[0], 0); }});
  all.push_back({"layer_norm", {normal(rows), normal({1000}), normal({1000})},
                 [](const RL& x) { return rtx::layer_norm(x[0], {1000}, x[1], x[2]); },
                 [](const TL& x) { return torch::layer_norm(x[0], {1000}, x[1], x[2]); }});
  all.push_back({"batch_norm_train", {normal({16, 8, 5, 7}), normal({8}), normal({8})},
                 [](const RL& x) { return rtx::batch_norm(x[0], {}, {}, x[1], x[2], true); },
                 [](const TL& x) { return torch::batch_norm(x[0], x[1], x[2], {}, {}, true, 0.1, 1e-5, false); }});
  all.push_back({"embedding", {normal({50, 16}), index({8, 9}, 50)},
                 [](const RL& x) { return rtx::embedding(x[0], x[1]); },
                 [](const TL& x) { return torch::embedding(x[0], x[1]); }});
  all.push_back({"cross_entropy", {normal({64, 1000}), index({64}, 1000)},
                 [](const RL& x) { return rtx::cross_entropy(x[0], x[1], {}, -100, rtx::Reduction::Mean, 0.1); },
                 [](const TL& x) {
                   return torch::nn::functional::cross_entropy(
                       x[0], x[1], torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(0.1));
                 }});
  const rtx::Shape heads{2, 3, 100, 64};
  all.push_back({"sdpa_causal", {normal(heads), normal(heads), normal(heads)},
                 [](const RL& x) { return rtx::scaled_dot_product_attention(x[0], x[1], x[2], {}, 0.0, true); },
                 [](const TL& x) { return at::scaled_dot_product_attention(x[0], x[1], x[2], {}, 0.0, true); }});
  all.push_back({"sdpa_keys_beyond_queries", {normal({4, 70, 40}), normal({4, 90, 40}), normal({4, 90, 40})},
                 [](const RL& x) { return rtx::scaled_dot_product_attention(x[0], x[1], x[2]); },
                 [](const TL& x) { return at::scaled_dot_product_attention(x[0], x[1], x[2]); }});
  all.push_back({"mse_loss", {normal(s), normal(s)}, [](const RL& x) { return rtx::mse_loss(x[0], x[1]); },
                 [](const TL& x) { return torch::mse_loss(x[0], x[1]); }});

  // Linear algebra, convolution and pooling.
  all.push_back({"matmul", {normal({65, 96}), normal({96, 80})}, [](const RL& x) { return rtx::matmul(x[0], x[1]); },
                 [](const TL& x) { return torch::matmul(x[0], x[1]); }});
  all.push_back({"matmul_batched_bcast", {normal({3, 1, 17, 32}), normal({4, 32, 9})},
                 [](const RL& x) { return rtx::matmul(x[0], x[1]); }, [](const TL& x) { return torch::matmul(x[0], x[1]); }});
  all.push_back({"linear", {normal({20, 48}), normal({30, 48}), normal({30})},
                 [](const RL& x) { return rtx::linear(x[0], x[1], x[2]); },
                 [](const TL& x) { return torch::linear(x[0], x[1], x[2]); }});
  all.push_back({"conv2d", {normal({4, 6, 13, 11}), normal({8, 3, 3, 3}), normal({8})},
                 [](const RL& x) { return rtx::conv2d(x[0], x[1], x[2], {2, 1}, {1, 1}, {1, 1}, 2); },
                 [](const TL& x) { return torch::conv2d(x[0], x[1], x[2], {2, 1}, {1, 1}, {1, 1}, 2); }});
  all.push_back({"max_pool2d", {normal({4, 6, 13, 11})}, [](const RL& x) { return rtx::max_pool2d(x[0], {3, 3}, {2, 2}, {1, 1}); },
                 [](const TL& x) { return torch::max_pool2d(x[0], {3, 3}, {2, 2}, {1, 1}); }});
  all.push_back({"avg_pool2d", {normal({4, 6, 13, 11})}, [](const RL& x) { return rtx::avg_pool2d(x[0], {3, 3}, {2, 2}, {1, 1}); },
                 [](const TL& x) { return torch::avg_pool2d(x[0], {3, 3}, {2, 2}, {1, 1}); }});
  all.push_back({"adaptive_avg_pool2d", {normal({4, 6, 13, 11})},
                 [](const RL& x) { return rtx::adaptive_avg_pool2d(x[0], {5, 4}); },
                 [](const TL& x) { return torch::adaptive_avg_pool2d(x[0], {5, 4}); }});

  // Indexing, joining and sorting.
  all.push_back({"gather", {normal({30, 40}), index({30, 25}, 40)}, [](const RL& x) { return rtx::gather(x[0], 1, x[1]); },
                 [](const TL& x) { return torch::gather(x[0], 1, x[1]); }});
  all.push_back({"index_select", {normal({30, 40}), index({50}, 30)},
                 [](const RL& x) { return rtx::index_select(x[0], 0, x[1]); },
                 [](const TL& x) { return torch::index_select(x[0], 0, x[1]); }});
  all.push_back({"scatter_add", {normal({30, 40}), index({30, 25}, 40), normal({30, 25})},
                 [](const RL& x) { return rtx::scatter_add(x[0], 1, x[1], x[2]); },
                 [](const TL& x) { return torch::scatter_add(x[0], 1, x[1], x[2]); }});
  all.push_back({"cat", {normal({5, 7}), normal({5, 3})}, [](const RL& x) { return rtx::cat({x[0], x[1]}, 1); },
                 [](const TL& x) { return torch::cat({x[0], x[1]}, 1); }});
  all.push_back({"tril", {normal({9, 12})}, [](const RL& x) { return rtx::tril(x[0], 1); },
                 [](const TL& x) { return torch::tril(x[0], 1); }});
  all.push_back({"sort", {distinct({20, 300})}, [](const RL& x) { return rtx::sort(x[0], 1).values; },
                 [](const TL& x) { return std::get<0>(torch::sort(x[0], 1)); }});
  all.push_back({"topk", {distinct({20, 300})}, [](const RL& x) { return rtx::topk(x[0], 7, 1).values; },
                 [](const TL& x) { return std::get<0>(torch::topk(x[0], 7, 1)); }});
  return all;
}

}  // namespace

int main() {
  if (!rtx::cuda::is_available() || !torch::cuda::is_available()) {
    std::printf("parity: needs a GPU visible to both rtx and torch (%s)\n", rtx::cuda::unavailable_reason().c_str());
    return 1;
  }
  rtx::manual_seed(1234);
  for (const Case& c : cases()) run(c);
  std::printf("parity with torch %s: %d passed, %d failed\n", TORCH_VERSION, g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
