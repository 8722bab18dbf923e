// Copies and memsets under the device-scoped pointer rules, queued on worker streams.
#include "emu_kit/cuda_style_api.h"
#include "musa_state.h"

using musa_emu::R;

EMU_KIT_CUDA_COPY_API(musa, R())
