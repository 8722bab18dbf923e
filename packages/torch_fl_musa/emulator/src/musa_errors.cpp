// musaGetErrorString ("<enumerator>: <CUDA's text>") and the per-thread last error.
#include "emu_kit/cuda_style_api.h"
#include "musa_state.h"

using musa_emu::R;

EMU_KIT_CUDA_ERROR_API(musa, R())
