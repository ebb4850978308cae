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

}  // namespace flash_attn_wheels::binding
