// Cards: count, the current one, synchronisation, memory figures.
#include "emu_kit/cuda_style_api.h"
#include "tops_state.h"

EMU_KIT_CUDA_DEVICE_API(tops, tops_emu::S())
