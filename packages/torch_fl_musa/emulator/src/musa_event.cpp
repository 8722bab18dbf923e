// Events (the framework's): complete when their stream's worker passes the record, stamped then.
#include "emu_kit/cuda_style_api.h"
#include "musa_state.h"

using musa_emu::R;

EMU_KIT_CUDA_EVENT_API(musa, R())
