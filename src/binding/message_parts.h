// Message parts for both torch APIs: included by each backend header (tensor_api_aten.h,
// tensor_api_stable.h) once it has declared IntList, Device and device_name, so that the backend's
// own messages (an allocation that failed) and the checks (checks.h) spell sizes and devices alike.
#pragma once

#include <cstddef>
#include <ostream>

namespace flash_attn_wheels::binding {

// Message parts for sizes and devices, formatted only when a message is built (fail() or
// TORCH_CHECK stream them): a check that passes costs no string. Both hold views, valid while the
// tensor (or the list) they came from lives, which is the whole of the check's expression.
struct ShapeText {
  IntList sizes;
};
struct DeviceText {
  Device device;
};

// "[2, 512, 8, 64]": sizes and strides as torch prints them.
inline ShapeText shape_text(IntList sizes) { return ShapeText{sizes}; }
inline std::ostream& operator<<(std::ostream& out, const ShapeText& shape) {
  out << '[';
  for (size_t i = 0; i < shape.sizes.size(); ++i) out << (i ? ", " : "") << shape.sizes[i];
  return out << ']';
}

// "cuda:0", "cpu": a device as torch prints it (device_name, in the backend).
inline DeviceText device_text(const Device& device) { return DeviceText{device}; }
inline std::ostream& operator<<(std::ostream& out, const DeviceText& device) {
  return out << device_name(device.device);
}

}  // namespace flash_attn_wheels::binding
