// The common prologue of every table function: lazy init, call counting,
// injected faults, and no C++ exception ever crossing the C ABI.
#pragma once

#include <torch_fl/runtime.h>

#include <exception>
#include <new>

#include "sim_config.h"
#include "sim_errors.h"
#include "sim_faults.h"

namespace torch_fl::sim {

// Runs `body` (returning tfl_status) as the table function `call`.
template <class Body>
tfl_status entry(Call call, Body&& body) noexcept {
  // Initialize before counting: FLAGOS_SIM_FAULTS counts "from now", and now
  // must not already include the call that triggered initialization.
  const tfl_status init = ensure_initialized();
  const tfl_status injected = count_call(call);
  if (init != TFL_OK) {
    return set_error(call == Call::init ? init : TFL_ERROR_NOT_INITIALIZED,
                     "tfl_%s: sim runtime failed to initialize: %s", call_name(call), init_error());
  }
  if (injected != TFL_OK) {
    // An injected fault does nothing else: no allocation, no bytes moved.
    return set_error(injected, "injected fault in %s (test)", call_name(call));
  }
  try {
    return body();
  } catch (const Failure& e) {
    return set_error(e.status(), "tfl_%s: %s", call_name(call), e.what());
  } catch (const std::bad_alloc&) {
    return set_error(TFL_ERROR_OUT_OF_MEMORY, "tfl_%s: host out of memory", call_name(call));
  } catch (const std::exception& e) {
    return set_error(TFL_ERROR_DEVICE, "tfl_%s: %s", call_name(call), e.what());
  } catch (...) {
    return set_error(TFL_ERROR_DEVICE, "tfl_%s: unknown C++ exception", call_name(call));
  }
}

}  // namespace torch_fl::sim
