// The flagos factories every flagos tensor is born from (empty.memory_format
// and empty_strided register them for PrivateUse1).
#pragma once

#include <ATen/core/Tensor.h>

#include "glue/deterministic_fill.h"

namespace torch_fl {

// An uninitialised strided tensor on the current flagos device, without a
// dispatcher call: what Inductor's generated code allocates its buffers with
// (as empty_strided_cuda does for CUDA).
at::Tensor empty_strided_on_current_device(c10::IntArrayRef size, c10::IntArrayRef stride,
                                           c10::ScalarType dtype);

}  // namespace torch_fl
