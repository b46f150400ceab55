// Validation of the optimizers' options, shared by the optimizers and the update functions.
#include <cmath>

#include "core/check.h"
#include "rtx/optim.h"

namespace rtx::optim {

void validate(const SgdOptions& o) {
  RTX_CHECK(o.lr >= 0 && std::isfinite(o.lr), ValueError, "[SGD] invalid learning rate lr={}", o.lr);
  RTX_CHECK(o.momentum >= 0 && std::isfinite(o.momentum), ValueError, "[SGD] invalid momentum={}", o.momentum);
  RTX_CHECK(o.dampening >= 0 && o.dampening <= 1, ValueError, "[SGD] dampening must be in [0, 1], got {}",
            o.dampening);
  RTX_CHECK(o.weight_decay >= 0 && std::isfinite(o.weight_decay), ValueError, "[SGD] invalid weight_decay={}",
            o.weight_decay);
  RTX_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0), ValueError,
            "[SGD] nesterov momentum needs momentum > 0 and dampening = 0, got momentum={} and dampening={}",
            o.momentum, o.dampening);
}

void validate(const AdamOptions& o) {
  RTX_CHECK(o.lr >= 0 && std::isfinite(o.lr), ValueError, "[Adam] invalid learning rate lr={}", o.lr);
  RTX_CHECK(o.betas.first >= 0 && o.betas.first < 1, ValueError, "[Adam] beta1 must be in [0, 1), got {}",
            o.betas.first);
  RTX_CHECK(o.betas.second >= 0 && o.betas.second < 1, ValueError, "[Adam] beta2 must be in [0, 1), got {}",
            o.betas.second);
  RTX_CHECK(o.eps >= 0 && std::isfinite(o.eps), ValueError, "[Adam] invalid eps={}", o.eps);
  RTX_CHECK(o.weight_decay >= 0 && std::isfinite(o.weight_decay), ValueError, "[Adam] invalid weight_decay={}",
            o.weight_decay);
}

}  // namespace rtx::optim
