// Initialisation: the allocator callbacks, then topsatenInit.
#include "aten_op.h"

namespace topsaten {

namespace {
bool g_init = false;
topsatenMallocFunc_t g_malloc = nullptr;
topsatenFreeFunc_t g_free = nullptr;
}  // namespace

bool emu::initialized() { return g_init; }

ATEN_API topsatenStatus_t topsatenMallocFuncRegister(topsatenMallocFunc_t fn) {
  g_malloc = fn;
  return fn ? TOPSATEN_STATUS_SUCCESS : TOPSATEN_STATUS_BAD_PARAM;
}
ATEN_API topsatenStatus_t topsatenFreeFuncRegister(topsatenFreeFunc_t fn) {
  g_free = fn;
  return fn ? TOPSATEN_STATUS_SUCCESS : TOPSATEN_STATUS_BAD_PARAM;
}
ATEN_API topsatenStatus_t topsatenMallocAsyncFuncRegister(topsatenMallocAsyncFunc_t fn) {
  return fn ? TOPSATEN_STATUS_SUCCESS : TOPSATEN_STATUS_BAD_PARAM;
}
ATEN_API topsatenStatus_t topsatenFreeAsyncFuncRegister(topsatenFreeAsyncFunc_t fn) {
  return fn ? TOPSATEN_STATUS_SUCCESS : TOPSATEN_STATUS_BAD_PARAM;
}
ATEN_API topsatenStatus_t topsatenInit() {
  if (int s = topsEmuInternalEnter("topsatenInit")) return static_cast<topsatenStatus_t>(s);
  // The SDK needs the allocator callbacks before init.
  if (!g_malloc || !g_free) return TOPSATEN_STATUS_BAD_PARAM;
  g_init = true;
  return TOPSATEN_STATUS_SUCCESS;
}
ATEN_API topsatenStatus_t topsatenFinalize() {
  g_init = false;
  return TOPSATEN_STATUS_SUCCESS;
}

}  // namespace topsaten
