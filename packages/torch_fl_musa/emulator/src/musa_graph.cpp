// Stream capture and graphs: the framework's CUDA-style capture under MUSA's names. Work put on a
// capturing stream (copies, memsets, muDNN kernels, host functions, event records) is recorded,
// and each musaGraphLaunch queues it again on a stream of the graph's GPU.
#include "emu_kit/cuda_style_api.h"
#include "musa_state.h"

using musa_emu::R;

EMU_KIT_CUDA_GRAPH_API(musa, R())
