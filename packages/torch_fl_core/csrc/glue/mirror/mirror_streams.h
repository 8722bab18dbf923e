// Streams on the delegate runtime: a flagos stream is the mirrored backend's
// stream with the same id (the delegate runtime's handle is that id), and the
// current flagos stream is the mirrored current stream, so setting one sets
// the other and every producer on a device shares one stream order.
#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "glue/stream_pool.h"

namespace torch_fl::mirror {

// The stream model over `guard`, the mirrored backend's guard (process lifetime).
const StreamModel* mirror_streams(c10::DeviceType type,
                                  const c10::impl::DeviceGuardImplInterface* guard);

}  // namespace torch_fl::mirror
