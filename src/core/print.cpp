// Tensor printing in PyTorch's repr format: one number format shared by all elements (integer-valued
// floats as "1.", four decimals, or scientific notation), large tensors summarized with "...", and the
// device/size/dtype/autograd suffixes.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ops/internal.h"
#include "rtx/autograd.h"

namespace rtx {
namespace {

constexpr int64_t kThreshold = 1000;  // tensors with more elements are summarized
constexpr int64_t kEdgeItems = 3;     // elements kept at each end of a summarized dim
constexpr int64_t kLineWidth = 80;

// t with every dim longer than 2 * kEdgeItems cut down to its first and last kEdgeItems entries
// (copied on t's device, so that only those elements travel to the host).
Tensor edges(Tensor t) {
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t n = t.size(d);
    if (n <= 2 * kEdgeItems) continue;
    Shape sizes = t.sizes();
    sizes[d] = 2 * kEdgeItems;
    Tensor out = detail::make_tensor(sizes, t.dtype(), t.device());
    detail::copy_raw(out.narrow(d, 0, kEdgeItems), t.narrow(d, 0, kEdgeItems));
    detail::copy_raw(out.narrow(d, kEdgeItems, kEdgeItems), t.narrow(d, n - kEdgeItems, kEdgeItems));
    t = out;
  }
  return t;
}

std::string pad_left(const std::string& s, size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

// The common format of a tensor's elements, chosen from every element printed (PyTorch's _Formatter).
// Elements come from a contiguous host tensor of float64, int64 or bool.
class Formatter {
 public:
  explicit Formatter(const Tensor& host) : host_(host), floating_(host.dtype() == kFloat64) {
    const int64_t n = host.numel();
    if (!floating_) {
      for (int64_t i = 0; i < n; ++i) width_ = std::max(width_, plain(i).size());
      return;
    }
    const double* v = host.data_ptr<double>();
    double lo = INFINITY, hi = 0;
    bool any = false;
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isfinite(v[i]) || v[i] == 0) continue;
      any = true;
      lo = std::min(lo, std::fabs(v[i]));
      hi = std::max(hi, std::fabs(v[i]));
      int_mode_ = int_mode_ && v[i] == std::ceil(v[i]);
    }
    if (!any) return;
    sci_ = hi / lo > 1000.0 || hi > 1.0e8 || (!int_mode_ && lo < 1.0e-4);
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isfinite(v[i]) || v[i] == 0) continue;
      // Integer-valued floats get a "." appended.
      width_ = std::max(width_, number(v[i]).size() + (int_mode_ && !sci_ ? 1 : 0));
    }
  }

  size_t width() const { return width_; }

  // Element i, right-aligned to the common width.
  std::string format(int64_t i) const {
    if (!floating_) return pad_left(plain(i), width_);
    const double v = host_.data_ptr<double>()[i];
    std::string s = number(v);
    if (int_mode_ && !sci_ && std::isfinite(v)) s += '.';
    return pad_left(s, width_);
  }

 private:
  // An integer or bool element as Python prints it.
  std::string plain(int64_t i) const {
    if (host_.dtype() == kBool) return host_.data_ptr<bool>()[i] ? "True" : "False";
    return std::to_string(host_.data_ptr<int64_t>()[i]);
  }

  // A float in the chosen notation, without padding or the integer mode's ".".
  std::string number(double v) const {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (sci_) return fmt::format("{:.4e}", v);
    if (int_mode_) return fmt::format("{:.0f}", v);
    return fmt::format("{:.4f}", v);
  }

  const Tensor& host_;
  bool floating_;
  bool int_mode_ = true;
  bool sci_ = false;
  size_t width_ = 1;
};

// Renders the nested brackets of a contiguous host tensor. A summarized dim (one whose original size
// was above 2 * kEdgeItems, cut down to its edges) gets "..." between its two halves.
class Renderer {
 public:
  Renderer(const Tensor& host, const Formatter& fmt, std::vector<bool> summarized)
      : host_(host), fmt_(fmt), summarized_(std::move(summarized)), strides_(detail::contiguous_strides(host.sizes())) {}

  std::string render(int64_t d, int64_t offset, int64_t indent) const {
    const int64_t nd = host_.dim();
    const int64_t n = host_.size(d);
    std::vector<std::string> items;
    for (int64_t j = 0; j < n; ++j) {
      if (summarized_[d] && j == kEdgeItems) items.emplace_back(d == nd - 1 ? " ..." : "...");
      const int64_t off = offset + j * strides_[d];
      items.push_back(d == nd - 1 ? fmt_.format(off) : render(d + 1, off, indent + 1));
    }
    if (d < nd - 1) {
      const std::string sep = "," + std::string(static_cast<size_t>(nd - d - 1), '\n') + std::string(indent + 1, ' ');
      return "[" + join(items, 0, items.size(), sep) + "]";
    }
    // A vector wraps after as many elements as fit in the line width.
    const size_t per_line = static_cast<size_t>(
        std::max<int64_t>(1, (kLineWidth - indent) / static_cast<int64_t>(fmt_.width() + 2)));
    std::vector<std::string> lines;
    for (size_t i = 0; i < items.size(); i += per_line)
      lines.push_back(join(items, i, std::min(items.size(), i + per_line), ", "));
    return "[" + join(lines, 0, lines.size(), ",\n" + std::string(indent + 1, ' ')) + "]";
  }

 private:
  static std::string join(const std::vector<std::string>& items, size_t b, size_t e, const std::string& sep) {
    std::string out;
    for (size_t i = b; i < e; ++i) {
      if (i > b) out += sep;
      out += items[i];
    }
    return out;
  }

  const Tensor& host_;
  const Formatter& fmt_;
  std::vector<bool> summarized_;
  Shape strides_;
};

// The bracketed values of a tensor with at least one element.
std::string values_str(const Tensor& t, int64_t indent) {
  const bool summarize = t.numel() > kThreshold;
  const DType shown = is_floating(t.dtype()) ? kFloat64 : t.dtype() == kBool ? kBool : kInt64;
  const Tensor host = (summarize ? edges(t) : t).to(Device(kCPU), shown).contiguous();
  const Formatter fmt(host);
  if (t.dim() == 0) return fmt.format(0);
  std::vector<bool> summarized;
  for (int64_t s : t.sizes()) summarized.push_back(summarize && s > 2 * kEdgeItems);
  return Renderer(host, fmt, std::move(summarized)).render(0, 0, indent);
}

// Python's str(tuple): "(2, 3)", "(0,)".
std::string tuple_str(const Shape& s) {
  if (s.size() == 1) return fmt::format("({},)", s[0]);
  return fmt::format("({})", fmt::join(s, ", "));
}

// Appends ", suffix" to s, starting a new line indented by indent when the line would pass the width.
std::string add_suffixes(std::string s, const std::vector<std::string>& suffixes, int64_t indent) {
  // Python's len(s) - s.rfind("\n") + 1, where rfind gives -1 when there is no newline.
  const size_t nl = s.rfind('\n');
  int64_t last_line = static_cast<int64_t>(s.size()) - (nl == std::string::npos ? -1 : static_cast<int64_t>(nl)) + 1;
  for (const auto& suffix : suffixes) {
    const int64_t len = static_cast<int64_t>(suffix.size());
    if (last_line + len + 2 > kLineWidth) {
      s += ",\n" + std::string(static_cast<size_t>(indent), ' ') + suffix;
      last_line = indent + len;
    } else {
      s += ", " + suffix;
      last_line += len + 2;
    }
  }
  return s + ")";
}

}  // namespace

std::string Tensor::str() const {
  const auto fn = defined() ? grad_fn() : nullptr;
  return str("", fn ? fn->name() : std::string());
}

std::string Tensor::str(const std::string& dtype_prefix, const std::string& grad_fn_name) const {
  if (!defined()) return "tensor(undefined)";
  const std::string prefix = "tensor(";
  const int64_t indent = static_cast<int64_t>(prefix.size());
  std::vector<std::string> suffixes;
  if (!is_cpu()) suffixes.push_back("device='" + device().str() + "'");
  const std::string dtype_suffix = "dtype=" + dtype_prefix + dtype_name(dtype());
  const DType default_float = get_default_dtype();
  std::string body;
  if (numel() == 0) {
    // No element shows the dtype, so anything but the default float type is named.
    if (dim() != 1) suffixes.push_back("size=" + tuple_str(sizes()));
    if (dtype() != default_float) suffixes.push_back(dtype_suffix);
    body = "[]";
  } else {
    if (dtype() != default_float && dtype() != kInt64 && dtype() != kBool) suffixes.push_back(dtype_suffix);
    body = values_str(detach(), indent);
  }
  if (grad_fn()) suffixes.push_back("grad_fn=<" + grad_fn_name + ">");
  else if (requires_grad()) suffixes.push_back("requires_grad=True");
  return add_suffixes(prefix + body, suffixes, indent);
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace rtx
