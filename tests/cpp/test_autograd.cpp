// Tests of the autograd engine: .grad accumulation, leaf/requires_grad rules, graph retention,
// higher-order derivatives, autograd::grad, hooks, grad mode, detach, in-place checks, custom
// functions, checkpointing, anomaly mode, deep graphs and broadcast gradient reduction.
#include <atomic>
#include <cmath>
#include <optional>
#include <thread>
#include <vector>

#include "test_utils.h"

namespace rtx::testing {
namespace {

class AutogradTest : public DeviceTest {
 protected:
  Tensor leaf(const std::vector<double>& v, const Shape& shape) const { return make(v, shape, dev()).requires_grad_(); }
  Tensor vec(const std::vector<double>& v, const Shape& shape) const { return make(v, shape, dev()); }
};
INSTANTIATE_DEVICE_TESTS(AutogradTest);

// ---- .grad, leaves and requires_grad ------------------------------------------------------------

TEST_P(AutogradTest, GradAccumulatesAcrossBackwardCalls) {
  Tensor x = leaf({1, 2, 3}, {3});
  EXPECT_FALSE(x.grad().defined());
  Tensor y = x * x;
  y.backward(ones_like(y));
  EXPECT_TRUE(all_close(x.grad(), vec({2, 4, 6}, {3})));
  Tensor z = x * 3;
  z.backward(vec({1, 0, 2}, {3}));
  EXPECT_TRUE(all_close(x.grad(), vec({5, 4, 12}, {3})));
  // A scalar loss, through sum.
  (x * x).sum().backward();
  EXPECT_TRUE(all_close(x.grad(), vec({7, 8, 18}, {3})));
  // Zeroing and setting .grad.
  x.grad().zero_();
  (x * 2).backward(ones_like(x));
  EXPECT_TRUE(all_close(x.grad(), vec({2, 2, 2}, {3})));
  x.set_grad(Tensor());
  EXPECT_FALSE(x.grad().defined());
  EXPECT_TRUE(throws<ShapeError>([&] { x.set_grad(vec({1, 2}, {2})); }, "[set_grad]"));
  EXPECT_TRUE(throws<DTypeError>([&] { x.set_grad(vec({1, 2, 3}, {3}).to(kFloat32)); }, "[set_grad]"));
}

TEST_P(AutogradTest, LeafAndRequiresGradPropagation) {
  Tensor c = vec({1, 2, 3}, {3});
  EXPECT_TRUE(c.is_leaf());
  EXPECT_FALSE(c.requires_grad());
  EXPECT_EQ(c.grad_fn(), nullptr);
  Tensor d = c * 2;  // nothing requires grad: no graph
  EXPECT_TRUE(d.is_leaf());
  EXPECT_FALSE(d.requires_grad());

  Tensor x = leaf({1, 2, 3}, {3});
  EXPECT_TRUE(x.is_leaf());
  EXPECT_TRUE(x.requires_grad());
  Tensor y = x * c;
  EXPECT_FALSE(y.is_leaf());
  EXPECT_TRUE(y.requires_grad());
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(y.grad_fn()->name(), "mul");
  EXPECT_EQ(y.grad_fn()->next_edges().size(), 2u);
  Tensor v = x.view({3, 1});
  EXPECT_FALSE(v.is_leaf());
  EXPECT_TRUE(v.requires_grad());
  Tensor e = zeros({3}, TensorOptions(kFloat64, dev(), true));
  EXPECT_TRUE(e.requires_grad() && e.is_leaf());
  {
    NoGradGuard ng;
    Tensor w = x * 2;
    EXPECT_TRUE(w.is_leaf());
    EXPECT_FALSE(w.requires_grad());
  }
  // Non-leaf .grad stays undefined unless retained.
  y.backward(ones_like(y));
  EXPECT_FALSE(y.grad().defined());
  EXPECT_TRUE(all_close(x.grad(), c));

  // requires_grad_ rules.
  Tensor i = make({1, 2}, {2}, dev(), kInt64);
  EXPECT_TRUE(throws<DTypeError>([&] { i.requires_grad_(); }, "floating point"));
  EXPECT_TRUE(throws<DTypeError>([&] { zeros({2}, TensorOptions(kInt32, dev(), true)); }, "int32"));
  EXPECT_FALSE(i.requires_grad());
  i.requires_grad_(false);  // a no-op
  EXPECT_TRUE(throws<Error>([&] { y.requires_grad_(); }, "leaf"));
  EXPECT_TRUE(throws<Error>([&] { y.requires_grad_(false); }, "'mul'"));
  x.requires_grad_(false);
  EXPECT_FALSE(x.requires_grad());
  EXPECT_FALSE((x * 2).requires_grad());
  Tensor h = vec({1}, {1}).to(kFloat16).requires_grad_();
  EXPECT_TRUE(h.requires_grad());
}

TEST_P(AutogradTest, BackwardTwiceNeedsRetainGraph) {
  Tensor x = leaf({0.5, -1}, {2});
  Tensor y = x.exp();
  y.backward(ones_like(y));
  EXPECT_TRUE(throws<Error>([&] { y.backward(ones_like(y)); }, "retain_graph"));
  // Nodes that saved nothing are released too.
  Tensor z = x + 1;
  z.backward(ones_like(z));
  EXPECT_TRUE(throws<Error>([&] { z.backward(ones_like(z)); }, "retain_graph"));

  Tensor a = leaf({0.5, -1}, {2});
  Tensor b = a.exp();
  b.backward(ones_like(b), /*retain_graph=*/true);
  b.backward(ones_like(b));
  EXPECT_TRUE(all_close(a.grad(), vec({2 * std::exp(0.5), 2 * std::exp(-1.0)}, {2})));
  // retain_graph with autograd::grad too.
  Tensor c = a.sin();
  const TensorList g1 = autograd::grad({c}, {a}, {ones_like(c)}, true);
  const TensorList g2 = autograd::grad({c}, {a}, {ones_like(c)});
  EXPECT_TRUE(all_close(g1[0], g2[0]));
  EXPECT_TRUE(throws<Error>([&] { autograd::grad({c}, {a}, {ones_like(c)}); }, "retain_graph"));
}

TEST_P(AutogradTest, BackwardArgumentErrors) {
  Tensor x = leaf({1, 2, 3}, {3});
  Tensor y = x * 2;
  EXPECT_TRUE(throws<ShapeError>([&] { y.backward(); }, "one-element"));
  EXPECT_TRUE(throws<ShapeError>([&] { y.backward(vec({1, 1}, {2})); }, "gradient 0 has shape [2]"));
  EXPECT_TRUE(throws<Error>([&] { vec({1}, {1}).backward(); }, "does not require grad"));
  EXPECT_TRUE(throws<ValueError>([&] { autograd::backward({y, y}, {ones_like(y)}); }, "[backward]"));
  // A one-element tensor of any shape needs no explicit gradient.
  Tensor s = (x * 2).view({3, 1}).slice(0, 1, 2);
  s.backward();
  EXPECT_TRUE(all_close(x.grad(), vec({0, 2, 0}, {3})));
}

TEST_P(AutogradTest, HigherOrderDerivatives) {
  Tensor x = leaf({1.5}, {});
  Tensor y = x * x * x;
  const Tensor d1 = autograd::grad({y}, {x}, {}, std::nullopt, true)[0];
  EXPECT_NEAR(d1.item<double>(), 3 * 1.5 * 1.5, 1e-12);
  EXPECT_TRUE(d1.requires_grad());
  const Tensor d2 = autograd::grad({d1}, {x}, {}, std::nullopt, true)[0];
  EXPECT_NEAR(d2.item<double>(), 6 * 1.5, 1e-12);
  const Tensor d3 = autograd::grad({d2}, {x}, {}, std::nullopt, true)[0];
  EXPECT_NEAR(d3.item<double>(), 6, 1e-12);
  // The same through pow with a scalar exponent and through backward(create_graph).
  Tensor p = pow(x, 3);
  p.backward({}, false, /*create_graph=*/true);
  const Tensor gx = x.grad();
  EXPECT_NEAR(gx.item<double>(), 6.75, 1e-12);
  ASSERT_TRUE(gx.requires_grad());
  const Tensor gg = autograd::grad({gx}, {x}, {}, std::nullopt, true)[0];
  EXPECT_NEAR(gg.item<double>(), 9, 1e-12);
  EXPECT_NEAR(autograd::grad({gg}, {x})[0].item<double>(), 6, 1e-12);
  // backward(create_graph) makes the cycle x -> x.grad -> its graph -> x (as in PyTorch); break it.
  x.set_grad(Tensor());
  // Four derivatives of sin cycle back to sin.
  Tensor z = leaf({0.7, -0.3}, {2});
  Tensor f = z.sin();
  std::vector<std::vector<double>> expect = {{std::cos(0.7), std::cos(-0.3)},
                                             {-std::sin(0.7), -std::sin(-0.3)},
                                             {-std::cos(0.7), -std::cos(-0.3)},
                                             {std::sin(0.7), std::sin(-0.3)}};
  for (const auto& e : expect) {
    f = autograd::grad({f}, {z}, {ones_like(f)}, std::nullopt, true)[0];
    EXPECT_TRUE(all_close(f, vec(e, {2})));
  }
  // Mixed partials of x * y^2 with broadcasting: d2/dxdy = 2y summed over the broadcast.
  Tensor a = leaf({1, 2, 3}, {3, 1});
  Tensor b = leaf({0.5, -1}, {1, 2});
  Tensor q = a * b * b;
  const Tensor ga = autograd::grad({q}, {a}, {ones_like(q)}, std::nullopt, true)[0];
  EXPECT_EQ(ga.sizes(), Shape({3, 1}));
  const Tensor gab = autograd::grad({ga}, {b}, {ones_like(ga)})[0];
  EXPECT_TRUE(all_close(gab, vec({3 * 2 * 0.5, 3 * 2 * -1.0}, {1, 2})));
  EXPECT_TRUE(gradgradcheck([](const TensorList& in) { return TensorList{in[0] * in[1] * in[1]}; }, {a, b}));
}

TEST_P(AutogradTest, GradFunction) {
  Tensor x = leaf({1, 2}, {2});
  Tensor unused = leaf({5}, {1});
  Tensor y = (x * x).sum();
  const TensorList g = autograd::grad({y}, {x, unused}, {}, true, false, /*allow_unused=*/true);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_TRUE(all_close(g[0], vec({2, 4}, {2})));
  EXPECT_FALSE(g[1].defined());
  EXPECT_TRUE(throws<Error>([&] { autograd::grad({y}, {x, unused}, {}, true); }, "allow_unused"));
  EXPECT_TRUE(throws<Error>([&] { autograd::grad({y}, {vec({1}, {1})}, {}, true); }, "does not require grad"));
  // grad does not touch .grad.
  EXPECT_FALSE(x.grad().defined());
  // With respect to a non-leaf, and several outputs at once (their gradients add).
  Tensor m = x * 3;
  Tensor o1 = m * m, o2 = m.sin();
  const TensorList gm = autograd::grad({o1, o2}, {m, x}, {ones_like(o1), ones_like(o2)});
  EXPECT_TRUE(all_close(gm[0], vec({2 * 3 + std::cos(3.0), 2 * 6 + std::cos(6.0)}, {2})));
  EXPECT_TRUE(all_close(gm[1], vec({3 * (2 * 3 + std::cos(3.0)), 3 * (2 * 6 + std::cos(6.0))}, {2})));
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(m.grad().defined());
  // The same input twice, and the output itself as input.
  Tensor k = x * 2;
  const TensorList twice = autograd::grad({k}, {x, x, k}, {vec({1, 1}, {2})});
  EXPECT_TRUE(all_close(twice[0], vec({2, 2}, {2})));
  EXPECT_TRUE(all_close(twice[1], vec({2, 2}, {2})));
  EXPECT_TRUE(all_close(twice[2], vec({1, 1}, {2})));
  // Broadcast inputs get gradients of their own shape.
  Tensor r = leaf({2}, {1});
  Tensor s = x * r;
  EXPECT_EQ(autograd::grad({s}, {r}, {ones_like(s)})[0].sizes(), Shape({1}));
}

// ---- hooks --------------------------------------------------------------------------------------

TEST_P(AutogradTest, Hooks) {
  Tensor x = leaf({1, 2}, {2});
  int calls = 0;
  Tensor seen;
  const int64_t observe = x.register_hook([&](const Tensor& g) {
    ++calls;
    seen = g.clone();
    return Tensor();  // keep the gradient
  });
  Tensor y = x * 3;
  y.backward(ones_like(y));
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(all_close(seen, vec({3, 3}, {2})));
  EXPECT_TRUE(all_close(x.grad(), vec({3, 3}, {2})));
  // A hook that scales the leaf's gradient.
  const int64_t scale = x.register_hook([](const Tensor& g) { return g * 10; });
  x.set_grad(Tensor());
  (x * 3).backward(ones_like(x));
  EXPECT_EQ(calls, 2);
  EXPECT_TRUE(all_close(x.grad(), vec({30, 30}, {2})));
  x.remove_hook(scale);
  x.remove_hook(observe);
  x.set_grad(Tensor());
  (x * 3).backward(ones_like(x));
  EXPECT_EQ(calls, 2);
  EXPECT_TRUE(all_close(x.grad(), vec({3, 3}, {2})));

  // A hook on a non-leaf changes what flows further down.
  Tensor a = leaf({1, 2}, {2});
  Tensor b = a * a;
  const int64_t h = b.register_hook([](const Tensor& g) { return g * 2; });
  Tensor c = b * 5;
  c.backward(ones_like(c), true);
  EXPECT_TRUE(all_close(a.grad(), vec({20, 40}, {2})));
  b.remove_hook(h);
  a.set_grad(Tensor());
  c.backward(ones_like(c));
  EXPECT_TRUE(all_close(a.grad(), vec({10, 20}, {2})));
  // autograd::grad runs hooks too.
  Tensor p = leaf({1}, {1});
  p.register_hook([](const Tensor& g) { return g * -1; });
  EXPECT_TRUE(all_close(autograd::grad({p * 4}, {p}, {vec({1}, {1})})[0], vec({-4}, {1})));
  EXPECT_TRUE(throws<Error>([&] { vec({1}, {1}).register_hook([](const Tensor& g) { return g; }); }, "[register_hook]"));
}

TEST_P(AutogradTest, PostAccumulateGradHooksAndEndOfBackwardCallbacks) {
  Tensor w = leaf({1, 1}, {2});
  std::vector<std::string> events;
  const int64_t h = w.register_post_accumulate_grad_hook([&](const Tensor& p) {
    events.push_back("hook " + std::to_string(p.grad().cpu().data_ptr<double>()[0]));
    autograd::queue_callback([&] {
      events.push_back("end");
      autograd::queue_callback([&] { events.push_back("queued by a callback"); });
    });
  });
  (w * 2).sum().backward();
  (w * 3).sum().backward();  // the hook sees the accumulated gradient
  EXPECT_EQ(events, (std::vector<std::string>{"hook 2.000000", "end", "queued by a callback", "hook 5.000000", "end",
                                              "queued by a callback"}));
  w.remove_hook(h);
  (w * 3).sum().backward();
  EXPECT_EQ(events.size(), 6u);
  EXPECT_TRUE(throws<Error>([&] { (w * 2).register_post_accumulate_grad_hook([](const Tensor&) {}); }, "non-leaf"));
  EXPECT_TRUE(throws<Error>([] { autograd::queue_callback([] {}); }, "no backward pass is running"));
}

TEST_P(AutogradTest, RetainGradOnNonLeaves) {
  Tensor x = leaf({1, 2}, {2});
  Tensor y = x * 2;
  Tensor z = y * y;
  EXPECT_FALSE(y.retains_grad());
  y.retain_grad();
  EXPECT_TRUE(y.retains_grad());
  z.backward(ones_like(z), true);
  EXPECT_TRUE(all_close(y.grad(), vec({4, 8}, {2})));
  EXPECT_FALSE(z.grad().defined());
  z.backward(ones_like(z));
  EXPECT_TRUE(all_close(y.grad(), vec({8, 16}, {2})));
  EXPECT_TRUE(all_close(x.grad(), vec({16, 32}, {2})));
  // Leaves keep .grad anyway; retain_grad on a tensor without grad is an error.
  x.retain_grad();
  EXPECT_TRUE(throws<Error>([&] { vec({1}, {1}).retain_grad(); }, "[retain_grad]"));
}

// ---- grad mode ----------------------------------------------------------------------------------

TEST_P(AutogradTest, GradModeGuardsNestAndAreThreadLocal) {
  Tensor x = leaf({1}, {1});
  EXPECT_TRUE(is_grad_enabled());
  {
    NoGradGuard a;
    EXPECT_FALSE(is_grad_enabled());
    EXPECT_FALSE((x * 2).requires_grad());
    {
      EnableGradGuard b;
      EXPECT_TRUE(is_grad_enabled());
      EXPECT_TRUE((x * 2).requires_grad());
      {
        NoGradGuard c;
        EXPECT_FALSE(is_grad_enabled());
      }
      EXPECT_TRUE(is_grad_enabled());
    }
    EXPECT_FALSE(is_grad_enabled());
    // Another thread starts with grad enabled and records its own graph.
    std::atomic<bool> other_enabled{false}, other_records{false};
    std::thread t([&] {
      other_enabled = is_grad_enabled();
      Tensor w = make({2}, {1}).requires_grad_();
      Tensor v = w * w;
      other_records = v.requires_grad();
      v.backward(ones_like(v));
    });
    t.join();
    EXPECT_TRUE(other_enabled.load());
    EXPECT_TRUE(other_records.load());
    EXPECT_FALSE(is_grad_enabled());
  }
  EXPECT_TRUE(is_grad_enabled());
  // A guard in another thread does not disable this one.
  std::atomic<bool> stop{false}, guarded{false};
  std::thread t2([&] {
    NoGradGuard ng;
    guarded = true;
    while (!stop) std::this_thread::yield();
  });
  while (!guarded) std::this_thread::yield();
  EXPECT_TRUE(is_grad_enabled());
  EXPECT_TRUE((x * 2).requires_grad());
  stop = true;
  t2.join();
  set_grad_enabled(false);
  EXPECT_FALSE(is_grad_enabled());
  set_grad_enabled(true);
}

// ---- detach and in-place rules ------------------------------------------------------------------

TEST_P(AutogradTest, DetachSharesStorageAndCutsTheGraph) {
  Tensor x = leaf({1, 2}, {2});
  Tensor y = x * 2;
  Tensor d = y.detach();
  EXPECT_TRUE(d.shares_storage(y));
  EXPECT_TRUE(d.is_leaf());
  EXPECT_FALSE(d.requires_grad());
  EXPECT_FALSE((d * 3).requires_grad());
  d.fill_(7);
  EXPECT_TRUE(all_close(y.detach(), vec({7, 7}, {2})));
  // The detached value enters a new graph as a constant.
  Tensor z = x * d;
  z.backward(ones_like(z));
  EXPECT_TRUE(all_close(x.grad(), vec({7, 7}, {2})));
  // detach_ turns a non-leaf into a leaf in place.
  Tensor w = x * 5;
  w.detach_();
  EXPECT_TRUE(w.is_leaf());
  EXPECT_FALSE(w.requires_grad());
}

TEST_P(AutogradTest, SavedTensorModifiedInPlace) {
  Tensor x = leaf({0.5, 1}, {2});
  // A saved output.
  Tensor y = x.exp();
  y.add_(1);
  EXPECT_TRUE(throws<Error>([&] { y.backward(ones_like(y)); }, "'exp'"));
  Tensor y2 = x.exp();
  y2.mul_(2);
  EXPECT_TRUE(throws<Error>([&] { y2.backward(ones_like(y2)); }, "version 0 when saved, 1 now"));
  // A saved input.
  Tensor a = x * 1;
  Tensor s = a.sin();
  a.mul_(3);
  EXPECT_TRUE(throws<Error>([&] { s.backward(ones_like(s)); }, "'sin'"));
  // Through a detached alias of a leaf.
  Tensor l = leaf({0.5, 1}, {2});
  Tensor c = l.cos();
  l.detach().add_(1);
  EXPECT_TRUE(throws<Error>([&] { c.backward(ones_like(c)); }, "modified in place"));
  // Not saved: no error.
  Tensor m = leaf({0.5, 1}, {2});
  Tensor n = m + 1;
  n.mul_(2);
  n.backward(ones_like(n));
  EXPECT_TRUE(all_close(m.grad(), vec({2, 2}, {2})));
}

TEST_P(AutogradTest, InPlaceOnNonLeafRecords) {
  const Tensor x = leaf({0.3, -0.7, 1.1}, {3});
  const Tensor y = leaf({1.2, 0.4, -0.9}, {3});
  const std::vector<Fn> fns = {
      [](const TensorList& in) { Tensor c = in[0].clone(); return TensorList{c.mul_(in[1])}; },
      [](const TensorList& in) { Tensor c = in[0].clone(); c.exp_(); c.mul_(in[1]); return TensorList{c.sub_(in[0])}; },
      [](const TensorList& in) { Tensor c = in[0] * in[1]; c.sin_(); c.pow_(2); return TensorList{c * in[0]}; },
      [](const TensorList& in) { Tensor c = in[0] * 1; c.div_(in[1]); return TensorList{add_(c, in[1], 2)}; },
      [](const TensorList& in) { Tensor c = in[0] + 0; c.copy_(in[1] * in[0]); return TensorList{c.square_()}; },
      [](const TensorList& in) { Tensor c = in[0] * 2; c.clamp_(-1, 0.5); return TensorList{c * in[1]}; },
  };
  for (size_t i = 0; i < fns.size(); ++i) {
    EXPECT_TRUE(gradcheck(fns[i], {x, y})) << "function " << i;
    EXPECT_TRUE(gradgradcheck(fns[i], {x, y})) << "function " << i;
  }
  // A leaf that does not require grad takes history from an operand that does.
  Tensor acc = zeros({3}, TensorOptions(kFloat64, dev()));
  acc.add_(x);
  acc.mul_(y);
  EXPECT_FALSE(acc.is_leaf());
  EXPECT_TRUE(acc.requires_grad());
  acc.backward(ones_like(acc));
  EXPECT_TRUE(all_close(x.grad(), y.detach()));
  EXPECT_TRUE(all_close(y.grad(), x.detach()));
}

TEST_P(AutogradTest, InPlaceOnTensorsWithoutHistory) {
  const Tensor x = leaf({0.5, -1.5, 2.0}, {3});
  const Tensor mask = vec({1, 0, 0}, {3}).to(kBool);
  // Every in-place path on a tensor without an autograd record, with and without grad mode.
  for (bool grad_mode : {true, false}) {
    std::optional<NoGradGuard> ng;
    if (!grad_mode) ng.emplace();
    Tensor p = vec({1, 2, 3}, {3});
    p.add_(1).mul_(2).exp_().log_().clamp_(0, 7).masked_fill_(mask, -1);
    p.copy_(p * 1);
    EXPECT_TRUE(all_close(p, vec({-1, 6, 7}, {3})));
    uniform_(p.fill_(4)).zero_();
    EXPECT_TRUE(p.is_leaf());
    EXPECT_FALSE(p.requires_grad());
    EXPECT_FALSE(p.grad_fn());
  }
  // A leaf whose requires_grad was switched off has a record but no history.
  Tensor off = vec({1, 2, 3}, {3});
  off.requires_grad_().requires_grad_(false);
  off.add_(1);
  EXPECT_FALSE(off.requires_grad());
  off.mul_(x);  // takes history from x
  EXPECT_TRUE(off.requires_grad());
  off.sum().backward();
  EXPECT_TRUE(all_close(x.grad(), vec({2, 3, 4}, {3})));
  // A result computed under NoGradGuard has no history.
  Tensor r;
  {
    NoGradGuard ng;
    r = x * 2;
  }
  EXPECT_FALSE(r.requires_grad());
  r.sub_(1).sqrt_();
  EXPECT_TRUE(r.is_leaf());
  r.add_(x);
  EXPECT_TRUE(r.requires_grad());
  x.grad().zero_();
  r.sum().backward();
  EXPECT_TRUE(all_close(x.grad(), vec({1, 1, 1}, {3})));
}

TEST_P(AutogradTest, InPlaceOnViewsOfTensorsRequiringGrad) {
  Tensor x = leaf({1, 2, 3}, {3});
  Tensor y = x * 1;
  Tensor v = y.select(0, 1);
  EXPECT_TRUE(throws<Error>([&] { v.mul_(2); }, "view"));
  Tensor xv = x.view({3, 1});
  EXPECT_TRUE(throws<Error>([&] { xv.add_(1); }, "view"));
  EXPECT_TRUE(throws<Error>([&] { x.add_(1); }, "leaf"));
  EXPECT_TRUE(all_close(x.detach(), vec({1, 2, 3}, {3})));  // the failed ops wrote nothing
  // Inside NoGradGuard, as optimizers do, both work.
  {
    NoGradGuard ng;
    x.slice(0, 0, 2).mul_(10);
    xv.sub_(1);
  }
  EXPECT_TRUE(all_close(x.detach(), vec({9, 19, 2}, {3})));
  // A view made before an in-place op on its recorded base must not be used afterwards.
  Tensor b = x * 1;
  Tensor bv = b.view({3, 1});
  b.add_(1);
  EXPECT_TRUE(throws<Error>([&] { bv * 2; }, "view"));
}

// ---- custom functions ---------------------------------------------------------------------------

TensorList square_fn(const TensorList& in) {
  return autograd::apply_function(
      "my_square", in,
      [](autograd::FunctionCtx& ctx, const TensorList& x) {
        ctx.save_for_backward({x[0]});
        EXPECT_FALSE(is_grad_enabled());  // forward runs without recording
        return TensorList{x[0] * x[0]};
      },
      [](autograd::FunctionCtx& ctx, const TensorList& g) {
        const Tensor x = ctx.saved_tensors()[0];
        return TensorList{g[0] * x * 2};
      });
}

TensorList exp_fn(const TensorList& in) {
  return autograd::apply_function(
      "my_exp", in,
      [](autograd::FunctionCtx& ctx, const TensorList& x) {
        Tensor y = x[0].exp();
        ctx.save_for_backward({y});
        return TensorList{y};
      },
      [](autograd::FunctionCtx& ctx, const TensorList& g) { return TensorList{g[0] * ctx.saved_tensors()[0]}; });
}

TEST_P(AutogradTest, CustomFunctionsSaveInputsAndOutputs) {
  const Tensor x = leaf({0.3, -1.2, 2}, {3});
  const TensorList y = square_fn({x});
  EXPECT_TRUE(y[0].requires_grad());
  ASSERT_NE(y[0].grad_fn(), nullptr);
  EXPECT_EQ(y[0].grad_fn()->name(), "my_square");
  EXPECT_TRUE(all_close(y[0], vec({0.09, 1.44, 4}, {3})));
  EXPECT_TRUE(gradcheck(square_fn, {x}));
  EXPECT_TRUE(gradgradcheck(square_fn, {x}));
  EXPECT_TRUE(gradcheck(exp_fn, {x}));
  EXPECT_TRUE(gradgradcheck(exp_fn, {x}));
  // A saved input modified in place is caught, naming the function.
  Tensor a = x * 1;
  const TensorList r = square_fn({a});
  a.add_(1);
  EXPECT_TRUE(throws<Error>([&] { r[0].backward(ones_like(r[0])); }, "my_square"));
  // Without any input requiring grad nothing is recorded.
  const TensorList plain = square_fn({vec({2}, {1})});
  EXPECT_FALSE(plain[0].requires_grad());
  EXPECT_TRUE(plain[0].is_leaf());
}

TEST_P(AutogradTest, CustomFunctionNeedsInputGradAndNonDifferentiableOutputs) {
  const Tensor x = leaf({0.5, -2, 3}, {3});
  const Tensor c = vec({1, 2, 3}, {3});
  std::vector<bool> fwd_needs, bwd_needs;
  size_t n_grad_outputs = 0;
  Tensor int_grad;
  auto fn = [&](const TensorList& in) {
    return autograd::apply_function(
        "split_sign", in,
        [&](autograd::FunctionCtx& ctx, const TensorList& i) {
          fwd_needs = {ctx.needs_input_grad(0), ctx.needs_input_grad(1)};
          // An integer output first, then a differentiable one.
          return TensorList{(i[0] > 0).to(kInt64), i[0] * i[1]};
        },
        [&](autograd::FunctionCtx& ctx, const TensorList& g) {
          bwd_needs = {ctx.needs_input_grad(0), ctx.needs_input_grad(1)};
          n_grad_outputs = g.size();
          int_grad = g[0];
          return TensorList{g[1] * c, ctx.needs_input_grad(1) ? g[1] : Tensor()};
        });
  };
  const TensorList out = fn({x, c});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].dtype(), kInt64);
  EXPECT_FALSE(out[0].requires_grad());
  EXPECT_TRUE(out[1].requires_grad());
  EXPECT_EQ(fwd_needs, (std::vector<bool>{true, false}));
  out[1].backward(vec({1, 10, 100}, {3}));
  EXPECT_EQ(bwd_needs, (std::vector<bool>{true, false}));
  EXPECT_EQ(n_grad_outputs, 2u);
  // The gradient of each output arrives in its own slot.
  EXPECT_TRUE(all_close(x.grad(), vec({1, 20, 300}, {3})));
  ASSERT_TRUE(int_grad.defined());
  EXPECT_EQ(int_grad.sizes(), Shape({3}));
  EXPECT_EQ(values(int_grad), (std::vector<double>{0, 0, 0}));
}

TEST_P(AutogradTest, CustomFunctionReturningItsInput) {
  const Tensor x = leaf({1, 2}, {2});
  auto fn = [](const TensorList& in) {
    return autograd::apply_function(
        "passthrough", in, [](autograd::FunctionCtx&, const TensorList& i) { return TensorList{i[0], i[0] * 2}; },
        [](autograd::FunctionCtx&, const TensorList& g) { return TensorList{g[0] + g[1] * 2}; });
  };
  const TensorList out = fn({x});
  EXPECT_FALSE(out[0].is_same(x));
  EXPECT_TRUE(out[0].shares_storage(x));
  EXPECT_FALSE(out[0].is_leaf());
  EXPECT_TRUE(x.is_leaf());
  EXPECT_EQ(out[0].grad_fn(), out[1].grad_fn());
  (out[0] + out[1]).backward(ones_like(x));
  EXPECT_TRUE(all_close(x.grad(), vec({3, 3}, {2})));
  EXPECT_TRUE(gradcheck(fn, {x}));
  // A backward that returns the wrong number of gradients.
  auto bad = [](const TensorList& in) {
    return autograd::apply_function(
        "bad_fn", in, [](autograd::FunctionCtx&, const TensorList& i) { return TensorList{i[0] * 2}; },
        [](autograd::FunctionCtx&, const TensorList& g) { return TensorList{g[0], g[0]}; });
  };
  const TensorList b = bad({x});
  EXPECT_TRUE(throws<Error>([&] { b[0].backward(ones_like(x)); }, "bad_fn"));
}

// ---- checkpointing ------------------------------------------------------------------------------

TEST_P(AutogradTest, CheckpointGivesTheSameGradients) {
  const Fn fn = [](const TensorList& in) {
    Tensor h = (in[0] * in[1]).tanh();
    return TensorList{h * h + in[0].exp(), h.sin()};
  };
  const Tensor x = leaf({0.2, -0.5, 1.0}, {3});
  const Tensor w = leaf({1.5}, {1});
  const TensorList direct = fn({x, w});
  const TensorList ckpt = autograd::checkpoint(fn, {x, w});
  ASSERT_EQ(ckpt.size(), 2u);
  EXPECT_TRUE(all_close(ckpt[0], direct[0]));
  EXPECT_TRUE(all_close(ckpt[1], direct[1]));
  EXPECT_TRUE(ckpt[0].requires_grad());
  const Tensor g0 = vec({1, -1, 2}, {3}), g1 = vec({0.5, 0.5, 3}, {3});
  const TensorList gd = autograd::grad(direct, {x, w}, {g0, g1});
  autograd::backward(ckpt, {g0, g1});
  EXPECT_TRUE(all_close(x.grad(), gd[0]));
  EXPECT_TRUE(all_close(w.grad(), gd[1]));
  EXPECT_EQ(w.grad().sizes(), Shape({1}));
  const Fn checkpointed = [&](const TensorList& in) { return autograd::checkpoint(fn, in); };
  EXPECT_TRUE(gradcheck(checkpointed, {x, w}));
  // Inputs that do not require grad: nothing recorded.
  EXPECT_FALSE(autograd::checkpoint(fn, {x.detach(), w.detach()})[0].requires_grad());
}

TEST_P(AutogradTest, CheckpointReplaysRandomNumbers) {
  const Fn fn = [](const TensorList& in) {
    Tensor mask = rand_like(in[0]);
    return TensorList{in[0] * mask + in[0].sin() * rand(in[0].sizes(), TensorOptions(kFloat64, in[0].device()))};
  };
  const Tensor x = leaf({0.1, 0.2, 0.3, 0.4}, {4});
  manual_seed(1234);
  const TensorList direct = fn({x});
  const TensorList gd = autograd::grad(direct, {x}, {ones_like(x)});
  const Tensor after_direct = rand({3});
  manual_seed(1234);
  const TensorList ckpt = autograd::checkpoint(fn, {x});
  EXPECT_TRUE(all_close(ckpt[0], direct[0]));
  ckpt[0].backward(ones_like(x));
  EXPECT_TRUE(all_close(x.grad(), gd[0]));
  // Backward restored the generator: the next draw is the one after the forward.
  EXPECT_TRUE(all_close(rand({3}), after_direct));
}

// ---- anomaly mode -------------------------------------------------------------------------------

TEST_P(AutogradTest, AnomalyModeNamesTheOp) {
  EXPECT_FALSE(autograd::is_anomaly_enabled());
  const Tensor x = leaf({-1, 2}, {2});
  {
    autograd::DetectAnomalyGuard guard;
    EXPECT_TRUE(autograd::is_anomaly_enabled());
    EXPECT_TRUE(throws<Error>([&] { x.log(); }, "'log'"));
    const Tensor z = leaf({0, 4}, {2});
    Tensor r = z.sqrt();  // finite forward, infinite gradient at 0
    EXPECT_TRUE(throws<Error>([&] { r.backward(ones_like(r)); }, "'sqrt'"));
    // Finite everywhere: no complaint.
    Tensor ok = (x * x).exp();
    ok.backward(ones_like(ok));
    {
      autograd::DetectAnomalyGuard nested;
    }
    EXPECT_TRUE(autograd::is_anomaly_enabled());
  }
  EXPECT_FALSE(autograd::is_anomaly_enabled());
  // Outside the guard NaN and Inf pass silently.
  Tensor l = x.log();
  EXPECT_TRUE(std::isnan(values(l)[0]));
  const Tensor z = leaf({0, 4}, {2});
  Tensor r = z.sqrt();
  r.backward(ones_like(r));
  EXPECT_TRUE(std::isinf(values(z.grad())[0]));
}

// ---- deep graphs, broadcasting, .grad ownership --------------------------------------------------

TEST_P(AutogradTest, LongChainBackwardAndDestruction) {
  constexpr int kSteps = 100000;
  const Tensor x = leaf({1.0}, {1});
  {
    Tensor y = x;
    for (int i = 0; i < kSteps; ++i) y = y * 1.0001;
    y.backward();
  }
  EXPECT_NEAR(x.grad().item<double>(), std::pow(1.0001, kSteps), 1e-9 * std::pow(1.0001, kSteps));
  // A long graph that is never differentiated (each node holding the previous result as a saved
  // tensor) is destroyed with the last tensor referring to it.
  {
    Tensor y = x;
    for (int i = 0; i < kSteps; ++i) y = y * 1.0001;
    EXPECT_TRUE(y.requires_grad());
  }
  // Through autograd::grad with a retained graph.
  Tensor y = x;
  for (int i = 0; i < kSteps / 10; ++i) y = y + 1;
  EXPECT_NEAR(autograd::grad({y}, {x}, {}, true)[0].item<double>(), 1.0, 1e-12);
  EXPECT_NEAR(autograd::grad({y}, {x})[0].item<double>(), 1.0, 1e-12);
}

TEST_P(AutogradTest, EngineReducesBroadcastGradients) {
  Tensor a = leaf({1, 2, 3}, {3, 1});
  Tensor b = leaf({10, 20, 30, 40}, {1, 4});
  Tensor y = a + b;
  EXPECT_EQ(y.sizes(), Shape({3, 4}));
  y.backward(ones_like(y));
  EXPECT_TRUE(all_close(a.grad(), vec({4, 4, 4}, {3, 1})));
  EXPECT_TRUE(all_close(b.grad(), vec({3, 3, 3, 3}, {1, 4})));
  // Leading dims and 0-d inputs; mixed dtypes get gradients of their own dtype.
  Tensor s = leaf({2}, {});
  Tensor m = make({1, 2, 3, 4, 5, 6}, {2, 1, 3}, dev(), kFloat32).requires_grad_();
  Tensor v = leaf({1, 2, 3}, {3});
  Tensor out = m * s + v;
  EXPECT_EQ(out.dtype(), kFloat64);
  out.backward(ones_like(out));
  EXPECT_EQ(s.grad().sizes(), Shape({}));
  EXPECT_NEAR(s.grad().item<double>(), 21, 1e-12);
  EXPECT_EQ(m.grad().dtype(), kFloat32);
  EXPECT_TRUE(all_close(m.grad(), make({2, 2, 2, 2, 2, 2}, {2, 1, 3}, dev(), kFloat32)));
  EXPECT_TRUE(all_close(v.grad(), vec({2, 2, 2}, {3})));
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return TensorList{in[0] * in[1] - in[1]}; },
                        {leaf({1, 2, 3}, {3, 1}), leaf({0.5, 1.5}, {1, 1, 2})}));
}

TEST_P(AutogradTest, LeafGradsAreNeverShared) {
  for (bool create_graph : {false, true}) {
    Tensor a = leaf({1, 2}, {2});
    Tensor b = leaf({3, 4}, {2});
    Tensor y = a + b;
    y.backward(ones_like(y), false, create_graph);
    EXPECT_FALSE(a.grad().shares_storage(b.grad())) << create_graph;
    {
      NoGradGuard ng;
      a.grad().mul_(5);
    }
    EXPECT_TRUE(all_close(b.grad(), vec({1, 1}, {2}))) << create_graph;
    EXPECT_TRUE(all_close(a.grad(), vec({5, 5}, {2}))) << create_graph;
    // A gradient the caller keeps is copied, not adopted.
    Tensor c = leaf({1, 2}, {2});
    Tensor gout = vec({1, 1}, {2});
    Tensor z = c * 1;
    z.backward(gout, false, create_graph);
    gout.fill_(9);
    EXPECT_TRUE(all_close(c.grad(), vec({1, 1}, {2}))) << create_graph;
    Tensor d = leaf({1, 2}, {2});
    d.backward(gout, false, create_graph);
    EXPECT_FALSE(d.grad().shares_storage(gout)) << create_graph;
  }
}

TEST_P(AutogradTest, GradientsAreContiguous) {
  for (bool create_graph : {false, true}) {
    Tensor x = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
    Tensor t = x.t();
    t.backward(vec({1, 2, 3, 4, 5, 6}, {3, 2}), false, create_graph);
    EXPECT_TRUE(x.grad().is_contiguous()) << create_graph;
    EXPECT_TRUE(all_close(x.grad(), vec({1, 3, 5, 2, 4, 6}, {2, 3})));
    Tensor y = leaf({1, 2, 3}, {3});
    y.expand({4, 3}).sum().backward({}, false, create_graph);
    EXPECT_TRUE(y.grad().is_contiguous()) << create_graph;
    EXPECT_TRUE(all_close(y.grad(), vec({4, 4, 4}, {3})));
    Tensor z = leaf({1, 2, 3}, {3});
    (z * 2).sum().backward({}, false, create_graph);
    EXPECT_TRUE(z.grad().is_contiguous()) << create_graph;
  }
}

}  // namespace
}  // namespace rtx::testing
