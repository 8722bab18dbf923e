// The CUDA-style runtime's stream capture and graphs: the capture rules are emu_kit/capture.h's,
// mapped to CUDA's statuses; a graph is what a capture recorded, an executable graph a copy of
// it that launches queue node by node.
#include "emu_kit/cuda_style.h"

namespace emu_kit {

int CudaRuntime::refused(const Verdict& v) {
  switch (v.refusal) {
    case Refusal::none:
      return cuda::kSuccess;
    case Refusal::forbidden:
      return fail(cuda::kStreamCaptureUnsupported);
    case Refusal::invalidated:
      return fail(cuda::kStreamCaptureInvalidated);
    case Refusal::merge:
      return fail(cuda::kStreamCaptureMerge);
    case Refusal::unmatched:
      return fail(cuda::kStreamCaptureUnmatched);
    case Refusal::unjoined:
      return fail(cuda::kStreamCaptureUnjoined);
    case Refusal::isolation:
      return fail(cuda::kStreamCaptureIsolation);
    case Refusal::captured_event:
      return fail(cuda::kCapturedEvent);
    case Refusal::wrong_thread:
      return fail(cuda::kStreamCaptureWrongThread);
    case Refusal::not_capturing:
      return fail(cuda::kIllegalState);
  }
  return fail(cuda::kUnknown);
}

int CudaRuntime::begin_capture(const char* fn, CudaStream* stream, int mode) {
  if (int e = enter(fn)) return e;
  if (mode < static_cast<int>(CaptureMode::global) || mode > static_cast<int>(CaptureMode::relaxed))
    return fail(cuda::kInvalidValue);
  Lock lk(mu_);
  CudaStreamRef s = stream_locked(stream);
  if (!s) return fail(cuda::kInvalidHandle);
  // The default stream synchronizes with the others: CUDA never captures it.
  if (s->is_default()) return fail(cuda::kStreamCaptureUnsupported);
  if (Verdict v = captures_.begin(s, static_cast<CaptureMode>(mode), fn)) return refused(v);
  return cuda::kSuccess;
}

int CudaRuntime::end_capture(const char* fn, CudaStream* stream, void** graph) {
  if (int e = enter(fn)) return e;
  if (!graph) return fail(cuda::kInvalidValue);
  CapturedGraph g;
  {
    Lock lk(mu_);
    CudaStreamRef s = stream_locked(stream);
    if (!s) return fail(cuda::kInvalidHandle);
    if (Verdict v = captures_.end(s.get(), fn, &g)) return refused(v);
  }
  *graph = graphs_.add(std::make_shared<CapturedGraph>(std::move(g)));
  return cuda::kSuccess;
}

int CudaRuntime::is_capturing(const char* fn, CudaStream* stream, int* status) {
  if (int e = enter(fn)) return e;
  if (!status) return fail(cuda::kInvalidValue);
  Lock lk(mu_);
  CudaStreamRef s = stream_locked(stream);
  if (!s) return fail(cuda::kInvalidHandle);
  *status = static_cast<int>(captures_.status(s.get()));
  return cuda::kSuccess;
}

int CudaRuntime::exchange_capture_mode(const char* fn, int* mode) {
  if (int e = enter(fn)) return e;
  if (!mode || *mode < static_cast<int>(CaptureMode::global) ||
      *mode > static_cast<int>(CaptureMode::relaxed))
    return fail(cuda::kInvalidValue);
  *mode = static_cast<int>(Captures::exchange_thread_mode(static_cast<CaptureMode>(*mode)));
  return cuda::kSuccess;
}

int CudaRuntime::graph_instantiate(const char* fn, void** exec, void* graph,
                                   unsigned long long flags) {
  if (int e = enter(fn)) return e;
  if (!exec || (flags & ~cuda::kGraphInstantiateFlags)) return fail(cuda::kInvalidValue);
  std::shared_ptr<CapturedGraph> g = graph ? graphs_.find(graph) : nullptr;
  if (!g) return fail(cuda::kInvalidValue);
  // The executable graph keeps the work: destroying the graph leaves it launchable.
  *exec = execs_.add(std::make_shared<CapturedGraph>(*g));
  return cuda::kSuccess;
}

int CudaRuntime::graph_launch(const char* fn, void* exec, CudaStream* stream) {
  if (int e = enter(fn)) return e;
  std::shared_ptr<CapturedGraph> x = exec ? execs_.find(exec) : nullptr;
  if (!x) return fail(cuda::kInvalidValue);
  Lock lk(mu_);
  CudaStreamRef s = stream_locked(stream);
  if (!s) return fail(cuda::kInvalidHandle);
  if (s->device() != x->device) return fail(cuda::kInvalidValue);
  Verdict v;
  if (captures_.any() && captures_.record_graph(s.get(), fn, x->body, &v))
    return v ? refused(v) : cuda::kSuccess;
  // Queued launches hold the work: destroying the graph meanwhile is safe.
  launch_graph(x->body, *s);
  return cuda::kSuccess;
}

int CudaRuntime::graph_exec_destroy(const char* fn, void* exec) {
  if (int e = enter(fn)) return e;
  if (!exec || !execs_.remove(exec)) return fail(cuda::kInvalidValue);
  return cuda::kSuccess;
}

int CudaRuntime::graph_destroy(const char* fn, void* graph) {
  if (int e = enter(fn)) return e;
  if (!graph || !graphs_.remove(graph)) return fail(cuda::kInvalidValue);
  return cuda::kSuccess;
}

int CudaRuntime::launch_host_func(const char* fn, CudaStream* stream, void (*host_fn)(void*),
                                  void* data) {
  if (int e = enter(fn)) return e;
  if (!host_fn) return fail(cuda::kInvalidValue);
  Lock lk(mu_);
  CudaStreamRef s = stream_locked(stream);
  if (!s) return fail(cuda::kInvalidHandle);
  WorkItem item;
  item.name = fn;
  item.run = [host_fn, data](char*, size_t) {
    host_fn(data);
    return 0;
  };
  Verdict v;
  if (captures_.any() && captures_.record(s.get(), fn, item, &v))
    return v ? refused(v) : cuda::kSuccess;
  s->push(std::move(item));
  return cuda::kSuccess;
}

}  // namespace emu_kit
