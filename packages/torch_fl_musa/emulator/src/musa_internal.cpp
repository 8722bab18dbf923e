// What libmudnn.so and libmccl.so (musa_emu_internal.h) and the tests (musa_emulator.h) reach
// beyond the API.
#include "emu_kit/controls.h"
#include "musa_emu_internal.h"
#include "musa_emulator.h"
#include "musa_state.h"

EMU_KIT_CONTROLS(musa, musa_emu::R().ledger(), musa_emu::R().device_memory)

EMU_KIT_EXPORT musaError_t musaEmuHoldStream(musaStream_t stream) {
  return static_cast<musaError_t>(musa_emu::R().hold(stream));
}

EMU_KIT_EXPORT musaError_t musaEmuReleaseStream(musaStream_t stream) {
  return static_cast<musaError_t>(musa_emu::R().release(stream));
}

namespace musa_emu {

int enter(const char* name) { return R().ledger().enter(name ? name : "?"); }

int current_device() { return R().current_device(); }

int stream_device(musaStream_t stream) {
  emu_kit::CudaStreamRef s = R().stream(stream);
  return s ? s->device() : -1;
}

int submit(const char* name, musaStream_t stream, const Range* ranges, size_t n,
           std::function<int(void* const* host, char* msg, size_t len)> work) {
  return R().submit(name ? name : "work", stream, emu_kit::ranges_of(ranges, n), std::move(work));
}

int submit_on_stream_device(const char* name, musaStream_t stream, const Range* ranges, size_t n,
                            std::function<int(void* const* host, char* msg, size_t len)> work) {
  return R().submit_on_stream_device(name ? name : "work", stream, emu_kit::ranges_of(ranges, n),
                                     std::move(work));
}

void violation(const char* message) { R().ledger().violation(message ? message : "(no message)"); }

}  // namespace musa_emu
