// Grad mode (per thread) and anomaly mode flags, and their guards.
#include "rtx/autograd.h"

namespace rtx {
namespace {
thread_local bool t_grad_enabled = true;
bool g_anomaly_enabled = false;
}  // namespace

bool is_grad_enabled() { return t_grad_enabled; }
void set_grad_enabled(bool enabled) { t_grad_enabled = enabled; }

NoGradGuard::NoGradGuard() : prev_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = prev_; }
EnableGradGuard::EnableGradGuard() : prev_(t_grad_enabled) { t_grad_enabled = true; }
EnableGradGuard::~EnableGradGuard() { t_grad_enabled = prev_; }

namespace autograd {
bool is_anomaly_enabled() { return g_anomaly_enabled; }
DetectAnomalyGuard::DetectAnomalyGuard() : prev_(g_anomaly_enabled) { g_anomaly_enabled = true; }
DetectAnomalyGuard::~DetectAnomalyGuard() { g_anomaly_enabled = prev_; }
}  // namespace autograd

}  // namespace rtx
