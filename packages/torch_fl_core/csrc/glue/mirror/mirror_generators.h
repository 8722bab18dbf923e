// Generators on the delegate runtime: each flagos generator wraps the
// mirrored backend's generator of the same device, whose state it is, so the
// mirrored kernels and every flagos API draw from one Philox stream.
#pragma once

#include <c10/core/DeviceType.h>

#include "glue/generator.h"

namespace torch_fl::mirror {

// The generator source over `type`'s generators (process lifetime).
const GeneratorSource* mirror_generators(c10::DeviceType type);

}  // namespace torch_fl::mirror
