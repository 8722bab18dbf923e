// Streams: the framework's inline streams (SDK work runs at submission), each with a lane of
// foreign work that only synchronisation drains (tops_foreign.cpp).
#include "emu_kit/cuda_style_api.h"
#include "tops_state.h"

EMU_KIT_CUDA_STREAM_API(tops, tops_emu::S())
