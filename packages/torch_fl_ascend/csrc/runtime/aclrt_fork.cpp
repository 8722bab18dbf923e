#include "aclrt_fork.h"

#include <pthread.h>
#include <torch_fl/kit/runtime_errors.h>

#include "aclrt_copy.h"
#include "aclrt_device.h"
#include "aclrt_host_functions.h"
#include "aclrt_memory.h"
#include "aclrt_stream.h"

namespace tfl_aclrt {

namespace {

// A forked child has none of the parent's NPU state (the driver's, the toolkit's) nor its report
// threads, and CANN starts it uninitialised: the runtime forgets the parent's streams,
// allocations, peer access and report threads, so the child initialises afresh on first use
// (core refuses flagos in a child whose parent had used it; a parent that only probed forks
// children that can use it). Locks held by threads that did not fork are re-made, not waited
// for; the parent's objects are abandoned, never destroyed.
void after_fork_in_child() {
  forget_devices_after_fork();
  forget_default_streams_after_fork();
  forget_allocations_after_fork();
  forget_reporters_after_fork();
  forget_peer_access_after_fork();
  torch_fl::kit::thread_error().clear();
}

__attribute__((constructor)) void register_fork_handler() {
  pthread_atfork(nullptr, nullptr, after_fork_in_child);
}

}  // namespace

}  // namespace tfl_aclrt
