// Events (the framework's): recorded on an inline stream they complete at once; they also mark
// how much of the stream's foreign work lies before them.
#include "emu_kit/cuda_style_api.h"
#include "tops_state.h"

EMU_KIT_CUDA_EVENT_API(tops, tops_emu::S())
