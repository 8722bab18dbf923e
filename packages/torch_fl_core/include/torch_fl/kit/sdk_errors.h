// A vendor SDK's error codes as one table: each code once, with its name as
// the SDK's header spells it and the runtime.h status it becomes. A runtime's
// to_status (and, for an SDK without a name function, its error_string), a
// collective library's status_of and a kernel library's error messages look
// the code up here instead of repeating it in switch statements. Plain C++ and
// runtime.h: a vendor library includes it with its SDK only.
#pragma once

#include <torch_fl/runtime.h>

#include <cstddef>

namespace torch_fl::kit {

template <class Error>
struct SdkError {
  Error code;
  const char* name;
  tfl_status status;
};

// TFL_KIT_SDK_ERROR(code, status): a table row, named after the code.
#define TFL_KIT_SDK_ERROR(code, status) {code, #code, status}
// TFL_KIT_SDK_NAME(code): a row that only names the code (a kernel library's statuses become a
// thrown error that names them, never a runtime.h status).
#define TFL_KIT_SDK_NAME(code) {code, #code, TFL_ERROR_DEVICE}

template <class Error, std::size_t N>
constexpr const SdkError<Error>* find_sdk_error(const SdkError<Error> (&table)[N], Error code) {
  for (const SdkError<Error>& row : table) {
    if (row.code == code) return &row;
  }
  return nullptr;
}

// The status of `code`; TFL_ERROR_DEVICE for a code the table does not list.
template <class Error, std::size_t N>
constexpr tfl_status sdk_status(const SdkError<Error> (&table)[N], Error code) {
  const SdkError<Error>* row = find_sdk_error(table, code);
  return row != nullptr ? row->status : TFL_ERROR_DEVICE;
}

// The name of `code`, or `unlisted` for a code the table does not list.
template <class Error, std::size_t N>
constexpr const char* sdk_error_name(const SdkError<Error> (&table)[N], Error code,
                                     const char* unlisted) {
  const SdkError<Error>* row = find_sdk_error(table, code);
  return row != nullptr ? row->name : unlisted;
}

}  // namespace torch_fl::kit
