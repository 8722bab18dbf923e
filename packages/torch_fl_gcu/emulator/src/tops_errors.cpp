// topsGetErrorString ("<enumerator>: <text>") and the per-thread last error.
#include "emu_kit/cuda_style_api.h"
#include "tops_state.h"

EMU_KIT_CUDA_ERROR_API(tops, tops_emu::S())
