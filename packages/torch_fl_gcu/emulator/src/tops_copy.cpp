// Copies and memsets under the device-scoped pointer rules. SDK work runs at submission, ahead
// of queued foreign work.
#include "emu_kit/cuda_style_api.h"
#include "tops_state.h"

EMU_KIT_CUDA_COPY_API(tops, tops_emu::S())
