// A vendor SDK's element types as one table: each torch dtype the SDK has, beside the SDK's own
// value. A kernel library's descriptors look a dtype up here instead of repeating a switch.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstddef>
#include <optional>

namespace torch_fl::kit {

template <class T>
struct SdkDtype {
  at::ScalarType torch;
  T sdk;
};

// The SDK's value for `t`; nullopt for a dtype the table does not list.
template <class T, std::size_t N>
constexpr std::optional<T> sdk_dtype(const SdkDtype<T> (&table)[N], at::ScalarType t) {
  for (const SdkDtype<T>& row : table) {
    if (row.torch == t) return row.sdk;
  }
  return std::nullopt;
}

}  // namespace torch_fl::kit
