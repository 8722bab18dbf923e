// The emulator's test controls (tops_emulator.h): the framework's, under the "tops" prefix.
#include "emu_kit/controls.h"
#include "tops_emulator.h"
#include "tops_state.h"

EMU_KIT_CONTROLS(tops, tops_emu::S().ledger(), tops_emu::S().device_memory)
