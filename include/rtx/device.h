// Where a tensor lives: the CPU or CUDA device N.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "rtx/export.h"

namespace rtx {

enum class DeviceType : uint8_t { CPU = 0, CUDA = 1 };
constexpr int kNumDeviceTypes = 2;

constexpr DeviceType kCPU = DeviceType::CPU;
constexpr DeviceType kCUDA = DeviceType::CUDA;

struct RTX_API Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;  // always 0 for the CPU

  Device() = default;
  Device(DeviceType t, int i = 0) : type(t), index(t == DeviceType::CPU ? 0 : i) {}  // NOLINT
  // "cpu", "cuda", "cuda:1"; throws ValueError on anything else.
  Device(const std::string& spec);  // NOLINT
  Device(const char* spec) : Device(std::string(spec)) {}  // NOLINT

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  std::string str() const;  // "cpu", "cuda:0"

  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

RTX_API const char* device_type_name(DeviceType t);
RTX_API std::ostream& operator<<(std::ostream& os, const Device& d);

}  // namespace rtx
