// Downstream use of an installed rtx: build a tensor and print its sum.
#include <rtx/config.h>
#include <rtx/rtx.h>

#include <iostream>

int main() {
  const float sum = rtx::ones({2, 3}).sum().item<float>();
  std::cout << "rtx " << RTX_VERSION << ": sum = " << sum << "\n";
  return sum == 6.0f ? 0 : 1;
}
