// Mirror mode: the delegate runtime mirrors an in-process torch backend (CUDA
// for "delegate:cuda"), and flagos memory, pinned memory and streams ARE that
// backend's. Chosen once, at activation: the mirrored backend's device
// allocator, host allocator, stream model and generators are installed in
// place of flagos's own, so no glue function asks per call which world it is
// in.
#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace torch_fl::mirror {

void install_mirror_mode(c10::DeviceType type, const c10::impl::DeviceGuardImplInterface* guard);

}  // namespace torch_fl::mirror
