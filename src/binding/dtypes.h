// The dtypes the binding names, the same enum in both torch APIs (tensor_api.h): c10::ScalarType,
// header-only (torch/headeronly/core/ScalarType.h) in the stable ABI and c10/core/ScalarType.h in the
// exact build. The backend header that includes this one has included its own first.
#pragma once

namespace flash_attn_wheels::binding {

using DType = c10::ScalarType;

inline constexpr DType kHalf = c10::ScalarType::Half;
inline constexpr DType kBFloat16 = c10::ScalarType::BFloat16;
inline constexpr DType kFloat = c10::ScalarType::Float;
inline constexpr DType kInt = c10::ScalarType::Int;
inline constexpr DType kLong = c10::ScalarType::Long;

// The Python spelling of a dtype ("torch.float32"), so that messages name what users type.
inline const char* torch_dtype_name(DType st) {
  switch (st) {
    case kHalf: return "torch.float16";
    case kBFloat16: return "torch.bfloat16";
    case kFloat: return "torch.float32";
    case c10::ScalarType::Double: return "torch.float64";
    case kInt: return "torch.int32";
    case kLong: return "torch.int64";
    case c10::ScalarType::Short: return "torch.int16";
    case c10::ScalarType::Char: return "torch.int8";
    case c10::ScalarType::Byte: return "torch.uint8";
    case c10::ScalarType::Bool: return "torch.bool";
    default: return c10::toString(st);
  }
}

}  // namespace flash_attn_wheels::binding
