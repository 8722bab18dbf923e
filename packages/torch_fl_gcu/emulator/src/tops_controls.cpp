// The emulator's test controls (tops_emulator.h): the framework's, under the "tops" prefix.
#include "emu_kit/controls.h"
#include "tops_emulator.h"
#include "tops_state.h"

using namespace tops_emu;

namespace {
emu_kit::DeviceMemory card_memory(int device) {
  Lock lock(S().mu);
  return valid_card(device) ? S().cards[static_cast<size_t>(device)].memory
                            : emu_kit::DeviceMemory{};
}
}  // namespace

EMU_KIT_CONTROLS(tops, S().ledger, card_memory)
