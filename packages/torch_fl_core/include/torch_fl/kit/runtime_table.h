// A vendor runtime's function table, filled from runtime.h's one field list:
// each field `f` takes the runtime's `rt_f`, so a field added to the ABI is a
// compile error until the runtime names it, and no field can land in another's
// place. A field the runtime does not implement is named as
//     constexpr std::nullptr_t rt_ipc_get_handle = nullptr;  // and why
// (core then does what runtime.h says it does without it).
#pragma once

#include <torch_fl/runtime.h>

#include <cstddef>

#define TFL_KIT_TABLE_FIELD(field, minor, returns_status) rt_##field,

// const tfl_runtime_v1 var = {...}: the table named `runtime_name` with
// `capabilities`, built against this header.
#define TFL_KIT_RUNTIME_TABLE(var, runtime_name, capabilities)                               \
  const tfl_runtime_v1 var = {TFL_RUNTIME_ABI_VERSION, sizeof(tfl_runtime_v1), runtime_name, \
                              capabilities, TFL_RUNTIME_V1_FUNCTIONS(TFL_KIT_TABLE_FIELD)}

// The library's entry point, at namespace scope outside any namespace.
#define TFL_KIT_RUNTIME_ENTRY(table)                                                       \
  extern "C" __attribute__((visibility("default"))) const tfl_runtime_v1* tfl_runtime_get( \
      uint32_t abi_version) {                                                              \
    return abi_version == TFL_RUNTIME_ABI_VERSION ? &(table) : nullptr;                    \
  }
