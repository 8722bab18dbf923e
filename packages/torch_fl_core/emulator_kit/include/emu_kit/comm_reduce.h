// Element types and reductions of the collective ABI (collective.h): sizes,
// names, and the host loops emulated collectives reduce with.
#pragma once

#include <torch_fl/collective.h>

#include <cstddef>

namespace emu_kit {

// Bytes per element of a tfl_dtype; 0 for a value that is not one.
size_t dtype_size(int dtype) noexcept;
// "f32", "bf16", ...; "an unknown dtype" otherwise.
const char* dtype_name(int dtype) noexcept;
// "sum", "avg", ...; "an unknown reduction" otherwise.
const char* reduce_op_name(int op) noexcept;
// Whether sim reduces `dtype` with `op` (AVG is for floating types only).
bool reduction_supported(int dtype, int op) noexcept;

// dst[i] = op over s of srcs[s][i], for s in 0..nsrc-1 in that order (every
// rank folds in the same order, so all get the same bits). f16 and bf16 fold
// in float and round once. dst may alias srcs[s] only when it is the same
// buffer.
void reduce_buffers(void* dst, const void* const* srcs, int nsrc, size_t count, int dtype, int op);

}  // namespace emu_kit
