// Module::name and Module::repr: PyTorch's module printing, the class name taken from the dynamic
// type unless the module was given one.
#include <typeinfo>

#if defined(__GNUG__)
#include <cxxabi.h>
#endif

#include <cstdlib>
#include <memory>
#include <sstream>

#include "rtx/nn.h"

namespace rtx::nn {
namespace {

std::string demangle(const char* mangled) {
#if defined(__GNUG__)
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> plain(abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  if (status == 0 && plain) return plain.get();
#endif
  return mangled;
}

// "rtx::nn::Linear" -> "Linear", "(anonymous namespace)::Net" -> "Net", "app::Block<app::Attn>" -> "Block<app::Attn>".
std::string unqualified(const std::string& name) {
  const size_t colon = name.rfind("::", name.find('<'));
  return colon == std::string::npos ? name : name.substr(colon + 2);
}

// Every line after the first indented by two spaces.
std::string indent_following_lines(const std::string& text) {
  std::string out;
  for (char c : text) {
    out += c;
    if (c == '\n') out += "  ";
  }
  return out;
}

}  // namespace

std::string Module::name() const { return name_.empty() ? unqualified(demangle(typeid(*this).name())) : name_; }

std::string Module::repr() const {
  std::vector<std::string> lines;
  const std::string extra = extra_repr();
  size_t extra_lines = 0;
  if (!extra.empty()) {
    std::istringstream in(extra);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    extra_lines = lines.size();
  }
  for (const auto& [key, child] : children_) lines.push_back("(" + key + "): " + indent_following_lines(child->repr()));
  std::string out = name() + "(";
  if (extra_lines == 1 && children_.empty()) {
    out += lines[0];
  } else if (!lines.empty()) {
    for (const auto& line : lines) out += "\n  " + line;
    out += "\n";
  }
  return out + ")";
}

std::ostream& operator<<(std::ostream& os, const Module& module) { return os << module.repr(); }

}  // namespace rtx::nn
