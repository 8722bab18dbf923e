// Model run instances made by stream capture: aclmdlRIExecuteAsync queues the recorded tasks on
// a stream, in recording order, reading and writing memory when they run; aclmdlRIDestroy
// releases one (executions already queued still complete). Tasks of streams that joined the
// capture are in that order too: it is the order of the calls, so every event wait between the
// streams is kept, and one stream runs them all.
#include "acl_capture.h"

using namespace acl_emu;

extern "C" {

aclError aclmdlRIExecuteAsync(aclmdlRI modelRI, aclrtStream stream) {
  ACL_ENTER("aclmdlRIExecuteAsync");
  ACL_NEED_STREAM("aclmdlRIExecuteAsync", st, stream);
  std::shared_ptr<const Nodes> nodes;
  int32_t device = -1;
  if (aclError e = captured_model("aclmdlRIExecuteAsync", modelRI, &nodes, &device)) return e;
  if (st->device() != device)
    return fail(ACL_ERROR_RT_STREAM_CONTEXT,
                "aclmdlRIExecuteAsync: model run instance %p was captured on device %d but stream "
                "%p belongs to device %d",
                modelRI, device, stream, st->device());
  // On a capturing stream the tasks are recorded into that capture, as any task would be.
  for (const Node& n : *nodes) {
    aclError e = ACL_SUCCESS;
    if (n.event) {
      e = record_event("aclmdlRIExecuteAsync", n.event, st);
    } else {
      emu_kit::WorkItem it;
      it.name = n.name + " (aclmdlRIExecuteAsync)";
      it.run = n.run;
      it.allocs = n.allocs;
      e = enqueue("aclmdlRIExecuteAsync", st, std::move(it));
    }
    if (e != ACL_SUCCESS) return e;
  }
  return ACL_SUCCESS;
}

aclError aclmdlRIDestroy(aclmdlRI modelRI) {
  ACL_ENTER("aclmdlRIDestroy");
  return destroy_model("aclmdlRIDestroy", modelRI);
}

}  // extern "C"
