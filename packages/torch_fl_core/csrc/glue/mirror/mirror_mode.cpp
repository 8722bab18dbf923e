#include "glue/mirror/mirror_mode.h"

#include "glue/caching_allocator.h"
#include "glue/host_allocator.h"
#include "glue/mirror/mirror_allocator.h"
#include "glue/mirror/mirror_generators.h"
#include "glue/mirror/mirror_host_allocator.h"
#include "glue/mirror/mirror_streams.h"
#include "glue/stream_pool.h"

namespace torch_fl::mirror {

void install_mirror_mode(c10::DeviceType type, const c10::impl::DeviceGuardImplInterface* guard) {
  install_stream_model(mirror_streams(type, guard));
  install_device_allocator(mirror_allocator(type));
  install_host_allocator(mirror_host_allocator(type));
  install_generator_source(mirror_generators(type));
}

}  // namespace torch_fl::mirror
