// Drives the kit's CUDA-style runtime (torch_fl/kit/cuda_style_runtime.h) over a fake SDK of
// CUDA's shape defined here: two devices whose pointers are device-scoped (a call touching one
// with another device current fails, as GCU and MUSA memory does), streams and events that run
// at once, a call log and one injectable fault; a second dialect of it with CUDA's stream
// capture (cuda_style_graphs.h); and a third declaring every optional member of
// cuda_style_hooks.h. Prints, per scenario, the tfl_status, the runtime's last error and the fake
// SDK calls it made.
#include <torch_fl/kit/cuda_style_runtime.h>
#include <torch_fl/kit/sdk_errors.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace fake {

enum Error {
  kOk = 0,
  kInvalidValue = 1,
  kNotReady = 600,
  kNoDevice = 100,
  kIllegal = 700,
  kWrongDevice = 101,
  kCaptureUnsupported = 900,
  kCaptureInvalidated = 901
};
enum MemcpyKind { H2H = 0, H2D = 1, D2H = 2, D2D = 3 };
struct StreamRec {
  int device;
  int pending;  // host functions see it drained: set by the test
  int capture;  // 0 none, 1 capturing, 2 invalidated (CUDA's statuses)
};
struct EventRec {
  int device;
};
using Stream = StreamRec*;
using Event = EventRec*;

thread_local int t_device = 0;
std::vector<std::string> g_log;
std::map<const void*, std::pair<size_t, int>> g_blocks;  // start -> (size, device)
std::string g_fail_call;
Error g_fail_status = kOk;
int g_sticky = 0;

int owner(const void* p) {
  for (const auto& [start, b] : g_blocks) {
    const char* s = static_cast<const char*>(start);
    if (p >= start && static_cast<const char*>(p) < s + b.first) return b.second;
  }
  return -1;
}
void log(const std::string& line) { g_log.push_back(line); }
Error enter(const char* call) {
  if (g_fail_call == call) {
    g_fail_call.clear();
    g_sticky = g_fail_status;
    return g_fail_status;
  }
  return kOk;
}
// Device-scoped: a device pointer is touched only with its device current.
Error scoped(const void* p) {
  const int o = owner(p);
  return o >= 0 && o != t_device ? kWrongDevice : kOk;
}

#define FAKE_CALL(name) \
  if (Error _e = enter(name)) return _e;

Error fakeGetDeviceCount(int* n) {
  FAKE_CALL("fakeGetDeviceCount");
  *n = 2;
  return kOk;
}
Error fakeGetDevice(int* d) {
  *d = t_device;
  return kOk;
}
Error fakeSetDevice(int d) {
  FAKE_CALL("fakeSetDevice");
  if (d < 0 || d > 1) return kInvalidValue;
  if (d != t_device) log("SetDevice " + std::to_string(d));
  t_device = d;
  return kOk;
}
Error fakeDeviceSynchronize() { return kOk; }
Error fakeMemGetInfo(size_t* f, size_t* t) {
  *f = 1;
  *t = 2;
  return kOk;
}
Error fakeMalloc(void** p, size_t n) {
  FAKE_CALL("fakeMalloc");
  *p = std::malloc(n);
  g_blocks[*p] = {n, t_device};
  log("Malloc dev" + std::to_string(t_device));
  return kOk;
}
Error fakeFree(void* p) {
  FAKE_CALL("fakeFree");
  if (Error e = scoped(p)) return e;
  log("Free dev" + std::to_string(owner(p)));
  g_blocks.erase(p);
  std::free(p);
  return kOk;
}
Error fakeHostAlloc(void** p, size_t n) {
  *p = std::malloc(n);
  return kOk;
}
Error fakeHostFree(void* p) {
  std::free(p);
  return kOk;
}
Error fakeMemcpy(void* d, const void* s, size_t n, MemcpyKind) {
  FAKE_CALL("fakeMemcpy");
  if (scoped(d) || scoped(s)) return kWrongDevice;
  std::memcpy(d, s, n);
  log("Memcpy dev" + std::to_string(t_device));
  return kOk;
}
Error fakeMemcpyAsync(void* d, const void* s, size_t n, MemcpyKind k, Stream st) {
  FAKE_CALL("fakeMemcpyAsync");
  if (scoped(d) || scoped(s) || st->device != t_device) return kWrongDevice;
  if (st->capture) {
    log("MemcpyAsync captured");
    return st->capture == 2 ? kCaptureInvalidated : kOk;
  }
  std::memcpy(d, s, n);
  log("MemcpyAsync kind" + std::to_string(k) + " dev" + std::to_string(t_device));
  return kOk;
}
Error fakeMemcpyPeer(void* d, int dd, const void* s, int sd, size_t n) {
  FAKE_CALL("fakeMemcpyPeer");
  if (t_device != sd) return kWrongDevice;
  std::memcpy(d, s, n);
  log("MemcpyPeer " + std::to_string(sd) + "->" + std::to_string(dd));
  return kOk;
}
Error fakeMemcpyPeerAsync(void* d, int dd, const void* s, int sd, size_t n, Stream st) {
  FAKE_CALL("fakeMemcpyPeerAsync");
  // The SDK's rule: the source device current and a stream of it.
  if (t_device != sd || st->device != sd) return kWrongDevice;
  std::memcpy(d, s, n);
  log("MemcpyPeerAsync " + std::to_string(sd) + "->" + std::to_string(dd) + " on stream of dev" +
      std::to_string(st->device));
  return kOk;
}
Error fakeMemsetAsync(void* p, int v, size_t n, Stream st) {
  if (scoped(p) || st->device != t_device) return kWrongDevice;
  std::memset(p, v, n);
  return kOk;
}
Error fakeStreamCreate(Stream* s, bool non_blocking, int) {
  FAKE_CALL("fakeStreamCreateWithFlags");
  *s = new StreamRec{t_device, 0, 0};
  log(std::string("StreamCreate dev") + std::to_string(t_device) +
      (non_blocking ? " nonblocking" : " default"));
  return kOk;
}
Error fakeStreamDestroy(Stream s) {
  delete s;
  return kOk;
}
Error fakeStreamSynchronize(Stream s) {
  // CUDA's rule: the capture's work is recorded, not run; the capture is invalidated.
  if (s->capture) {
    s->capture = 2;
    return kCaptureUnsupported;
  }
  return kOk;
}
Error fakeStreamQuery(Stream s) {
  FAKE_CALL("fakeStreamQuery");
  return s->pending ? kNotReady : kOk;
}
Error fakeStreamWaitEvent(Stream s, Event e) {
  log("StreamWaitEvent dev" + std::to_string(s->device) + " on event of dev" +
      std::to_string(e->device));
  return s->device == t_device ? kOk : kWrongDevice;
}
Error fakeEventCreate(Event* e, bool) {
  *e = new EventRec{t_device};
  return kOk;
}
Error fakeEventDestroy(Event e) {
  delete e;
  return kOk;
}
Error fakeEventRecord(Event e, Stream s) {
  if (s->device != t_device) return kWrongDevice;
  e->device = s->device;
  log("EventRecord dev" + std::to_string(s->device));
  return kOk;
}
Error fakeEventSynchronize(Event) { return kOk; }
Error fakeEventQuery(Event) { return kOk; }
Error fakeEventElapsedTime(float* ms, Event, Event) {
  *ms = 1.5f;
  return kOk;
}

// Stream capture, as CUDA's.
enum CaptureMode { kGlobal = 0, kThreadLocal = 1, kRelaxed = 2 };
enum CaptureStatus { kNone = 0, kActive = 1, kInvalidated = 2 };
struct GraphRec {
  int device;
};
struct ExecRec {
  int device;
};
using Graph = GraphRec*;
using GraphExec = ExecRec*;
thread_local CaptureMode t_mode = kGlobal;

Error fakeStreamBeginCapture(Stream s, CaptureMode m) {
  if (s->device != t_device) return kWrongDevice;
  s->capture = 1;
  log("BeginCapture dev" + std::to_string(s->device) + " mode " + std::to_string(m));
  return kOk;
}
Error fakeStreamEndCapture(Stream s, Graph* g) {
  const int was = s->capture;
  s->capture = 0;
  if (was == 2) return kCaptureInvalidated;
  *g = new GraphRec{s->device};
  log("EndCapture dev" + std::to_string(s->device));
  return kOk;
}
Error fakeStreamIsCapturing(Stream s, CaptureStatus* st) {
  *st = static_cast<CaptureStatus>(s->capture);
  return kOk;
}
Error fakeThreadExchangeStreamCaptureMode(CaptureMode* m) {
  const CaptureMode old = t_mode;
  t_mode = *m;
  *m = old;
  log("ExchangeMode " + std::to_string(t_mode));
  return kOk;
}
Error fakeGraphInstantiate(GraphExec* x, Graph g, unsigned long long flags) {
  *x = new ExecRec{g->device};
  log("Instantiate dev" + std::to_string(t_device) + " flags " + std::to_string(flags));
  return kOk;
}
Error fakeGraphLaunch(GraphExec x, Stream s) {
  log("GraphLaunch of dev" + std::to_string(x->device) + " on stream of dev" +
      std::to_string(s->device));
  return kOk;
}
Error fakeGraphExecDestroy(GraphExec x) {
  delete x;
  log("ExecDestroy");
  return kOk;
}
Error fakeGraphDestroy(Graph g) {
  delete g;
  log("GraphDestroy");
  return kOk;
}
Error fakeLaunchHostFunc(Stream s, void (*)(void*), void*) {
  log(std::string("LaunchHostFunc") + (s->capture ? " captured" : ""));
  return kOk;
}

// What only the third dialect calls.
Error fakeInit() {
  FAKE_CALL("fakeInit");
  log("Init");
  return kOk;
}

}  // namespace fake

using namespace fake;  // the dialect names each call as the SDK spells it

struct Fake {
  using Error = fake::Error;
  using Stream = fake::Stream;
  using Event = fake::Event;
  using MemcpyKind = fake::MemcpyKind;
  static constexpr Error kSuccess = fake::kOk;
  static constexpr Error kNotReady = fake::kNotReady;
  static constexpr Error kNoDevice = fake::kNoDevice;
  static constexpr const char* kRuntime = "fakert";
  static constexpr const char* kDevice = "FAKE dev";
  static constexpr const char* kErrorType = "fakeError_t";
  static constexpr const char* kDeviceName = "Fake device %d";
  static constexpr uint64_t kCapabilities = TFL_CAP_PEER_COPY | TFL_CAP_EVENT_TIMING;
  // Unlisted (kIllegal, kWrongDevice, ...): TFL_ERROR_DEVICE.
  static constexpr torch_fl::kit::SdkError<Error> kErrors[] = {
      TFL_KIT_SDK_ERROR(fake::kInvalidValue, TFL_ERROR_INVALID_VALUE),
      TFL_KIT_SDK_ERROR(fake::kCaptureUnsupported, TFL_ERROR_CAPTURE),
      TFL_KIT_SDK_ERROR(fake::kCaptureInvalidated, TFL_ERROR_CAPTURE),
  };
  static tfl_status to_status(Error e) { return torch_fl::kit::sdk_status(kErrors, e); }
  static const char* error_string(Error e) {
    if (e == fake::kCaptureUnsupported) return "not permitted when stream is capturing";
    if (e == fake::kCaptureInvalidated) return "a previous error during capture";
    return e == fake::kIllegal ? "an illegal address" : "fake failure";
  }
  static void clear_error() { fake::g_sticky = 0; }

  TFL_KIT_SDK_CALL(get_device_count, fakeGetDeviceCount)
  TFL_KIT_SDK_CALL(get_device, fakeGetDevice)
  TFL_KIT_SDK_CALL(set_device, fakeSetDevice)
  TFL_KIT_SDK_CALL(device_synchronize, fakeDeviceSynchronize)
  TFL_KIT_SDK_CALL(mem_get_info, fakeMemGetInfo)
  TFL_KIT_SDK_CALL(malloc, fakeMalloc)
  TFL_KIT_SDK_CALL(free, fakeFree)
  TFL_KIT_SDK_CALL(host_malloc, fakeHostAlloc)
  TFL_KIT_SDK_CALL(host_free, fakeHostFree)
  TFL_KIT_SDK_CALL(memcpy, fakeMemcpy)
  TFL_KIT_SDK_CALL(memcpy_async, fakeMemcpyAsync)
  TFL_KIT_SDK_CALL(memcpy_peer, fakeMemcpyPeer)
  TFL_KIT_SDK_CALL(memcpy_peer_async, fakeMemcpyPeerAsync)
  TFL_KIT_SDK_CALL(memset_async, fakeMemsetAsync)
  TFL_KIT_SDK_CALL(stream_create, fakeStreamCreate)
  TFL_KIT_SDK_CALL(stream_destroy, fakeStreamDestroy)
  TFL_KIT_SDK_CALL(stream_synchronize, fakeStreamSynchronize)
  TFL_KIT_SDK_CALL(stream_query, fakeStreamQuery)
  TFL_KIT_SDK_CALL(stream_wait_event, fakeStreamWaitEvent)
  TFL_KIT_SDK_CALL(event_create, fakeEventCreate)
  TFL_KIT_SDK_CALL(event_destroy, fakeEventDestroy)
  TFL_KIT_SDK_CALL(event_record, fakeEventRecord)
  TFL_KIT_SDK_CALL(event_synchronize, fakeEventSynchronize)
  TFL_KIT_SDK_CALL(event_query, fakeEventQuery)
  TFL_KIT_SDK_CALL(event_elapsed_time, fakeEventElapsedTime)
};

// The same SDK with CUDA's stream capture declared: the table records graphs.
struct FakeGraphs : Fake {
  static constexpr const char* kRuntime = "fakegraphs";
  static constexpr bool kGraphs = true;
  using Graph = fake::Graph;
  using GraphExec = fake::GraphExec;
  using CaptureMode = fake::CaptureMode;
  using CaptureStatus = fake::CaptureStatus;
  static constexpr CaptureMode kCaptureGlobal = fake::kGlobal;
  static constexpr CaptureMode kCaptureThreadLocal = fake::kThreadLocal;
  static constexpr CaptureMode kCaptureRelaxed = fake::kRelaxed;
  static constexpr CaptureStatus kCaptureNone = fake::kNone;
  static constexpr CaptureStatus kCaptureActive = fake::kActive;
  static constexpr CaptureStatus kCaptureInvalidated = fake::kInvalidated;
  TFL_KIT_SDK_CALL(begin_capture, fakeStreamBeginCapture)
  TFL_KIT_SDK_CALL(end_capture, fakeStreamEndCapture)
  TFL_KIT_SDK_CALL(graph_instantiate, fakeGraphInstantiate)
  TFL_KIT_SDK_CALL(graph_launch, fakeGraphLaunch)
  TFL_KIT_SDK_CALL(graph_exec_destroy, fakeGraphExecDestroy)
  TFL_KIT_SDK_CALL(graph_destroy, fakeGraphDestroy)
  TFL_KIT_SDK_CALL(stream_is_capturing, fakeStreamIsCapturing)
  TFL_KIT_SDK_CALL(exchange_capture_mode, fakeThreadExchangeStreamCaptureMode)
  TFL_KIT_SDK_CALL(launch_host_func, fakeLaunchHostFunc)
};

// The same SDK declaring every optional member (cuda_style_hooks.h); stream synchronization,
// stream destruction and event creation logged to show when the runtime asks for them.
struct FakeHooks : Fake {
  static constexpr const char* kRuntime = "fakehooks";
  static constexpr bool kChecksArguments = true;
  static constexpr bool kUnorderedSyncCopies = true;
  static constexpr bool kPinnedAsyncCopies = true;
  static constexpr bool kDrainBeforeStreamDestroy = true;
  static constexpr bool kStreamCallbacks = true;
  static constexpr bool kTracksEvents = true;
  TFL_KIT_SDK_CALL(init, fakeInit)
  static std::string failure_text(const char* call, int device, Error e, const std::string& d) {
    return std::string(call) + " on " + std::to_string(device) + " gave " + std::to_string(e) +
           " [" + d + "]";
  }
  static void device_name(int device, char* buf, size_t len) {
    std::snprintf(buf, len, "hooked %d", device);
  }
  static constexpr const char* stream_synchronize_name = "fakeStreamSynchronize";
  static Error stream_synchronize(Stream s) {
    log("StreamSynchronize dev" + std::to_string(s->device));
    return fakeStreamSynchronize(s);
  }
  static constexpr const char* stream_destroy_name = "fakeStreamDestroy";
  static Error stream_destroy(Stream s) {
    log("StreamDestroy dev" + std::to_string(s->device));
    return fakeStreamDestroy(s);
  }
  static constexpr const char* event_create_name = "fakeEventCreate";
  static Error event_create(Event* e, bool timing) {
    log("EventCreate dev" + std::to_string(t_device) + (timing ? " timing" : ""));
    return fakeEventCreate(e, timing);
  }
  TFL_KIT_SDK_CALL(launch_host_func, fakeLaunchHostFunc)
};

namespace {

const tfl_runtime_v1& rt = torch_fl::kit::CudaStyleRuntime<Fake>::table();
const tfl_runtime_v1& hrt = torch_fl::kit::CudaStyleRuntime<FakeHooks>::table();
const tfl_runtime_v1& grt = torch_fl::kit::CudaStyleRuntime<FakeGraphs>::table();

void report(const char* scenario, tfl_status st) {
  // One kit in this program: both tables write the thread's one message.
  std::printf("== %s: %d %s\n", scenario, static_cast<int>(st), st ? rt.last_error() : "");
  for (const auto& line : fake::g_log) std::printf("%s\n", line.c_str());
  fake::g_log.clear();
}

int g_host_fn_ran = 0;

}  // namespace

int main() {
  std::printf("table %s caps %llu graphs %d ipc %d\n", rt.name,
              static_cast<unsigned long long>(rt.capabilities), rt.graph_launch != nullptr,
              rt.ipc_get_handle != nullptr);
  int n = 0;
  report("device_count", rt.device_count(&n));
  std::printf("count %d\n", n);
  char name[64];
  report("device_name 1", rt.device_name(1, name, sizeof(name)));
  std::printf("name %s\n", name);
  report("device_name 2", rt.device_name(2, name, sizeof(name)));

  // Memory of device 1, freed with device 0 current: the owner is made current, then restored.
  void* p1 = nullptr;
  rt.set_device(1);
  report("malloc on 1", rt.malloc(&p1, 64));
  rt.set_device(0);
  fake::g_log.clear();
  report("free inside", rt.free(static_cast<char*>(p1) + 8));
  int device = -1;
  tfl_pointer_kind pk;
  rt.pointer_info(static_cast<char*>(p1) + 8, &pk, &device);
  std::printf("pointer_info kind %d device %d\n", static_cast<int>(pk), device);

  // Copies: the pointer that decides makes its device current; a kind that does not fit.
  char host[64] = "hello";
  report("h2d to 1 on the NULL stream of 0",
         rt.memcpy_async(p1, host, 16, TFL_MEMCPY_HOST_TO_DEVICE, nullptr));
  rt.set_device(1);
  report("h2d to 1 on the NULL stream of 1",
         rt.memcpy_async(p1, host, 16, TFL_MEMCPY_HOST_TO_DEVICE, nullptr));
  rt.set_device(0);
  std::strcpy(host, "");
  report("h2d with a device src",
         rt.memcpy_async(host, p1, 16, TFL_MEMCPY_HOST_TO_DEVICE, nullptr));
  report("sync d2h from 1", rt.memcpy(host, p1, 16, TFL_MEMCPY_DEVICE_TO_HOST));
  std::printf("host %s\n", host);

  // Between devices on a stream of the destination: run on the source's default stream, in
  // the caller's stream order both ways.
  void* p0 = nullptr;
  rt.malloc(&p0, 64);
  tfl_stream s0 = nullptr;
  rt.stream_create(&s0, 0);
  fake::g_log.clear();
  report("d2d 1->0 on a stream of 0", rt.memcpy_async(p0, p1, 16, TFL_MEMCPY_DEVICE_TO_DEVICE, s0));
  report("peer async with wrong owners", rt.memcpy_peer_async(p0, 1, p1, 0, 16, s0));

  // An SDK failure: named call, device, status string and type, detail; status mapped.
  fake::g_fail_call = "fakeMemcpyAsync";
  fake::g_fail_status = fake::kIllegal;
  report("injected", rt.memcpy_async(host, p0, 16, TFL_MEMCPY_DEVICE_TO_HOST, s0));
  std::printf("sticky %d\n", fake::g_sticky);
  fake::g_fail_call = "fakeMalloc";
  fake::g_fail_status = fake::kInvalidValue;
  void* q = nullptr;
  report("malloc fails", rt.malloc(&q, 32));

  // Stream query's not-ready; events; a host function after an event.
  static_cast<fake::Stream>(s0->stream)->pending = 1;
  report("query pending", rt.stream_query(s0));
  static_cast<fake::Stream>(s0->stream)->pending = 0;
  report("query drained", rt.stream_query(s0));
  tfl_event e0 = nullptr, e1 = nullptr;
  rt.event_create(&e0, 0);
  rt.event_create(&e1, 0);
  rt.event_record(e0, s0);
  rt.event_record(e1, s0);
  float ms = 0;
  report("elapsed", rt.event_elapsed_ms(&ms, e0, e1));
  std::printf("ms %.1f\n", ms);
  report("unknown event flags", rt.event_create(&e0, 8));
  report("host fn",
         rt.launch_host_func(s0, [](void* u) { *static_cast<int*>(u) = 1; }, &g_host_fn_ran));
  report("stream sync", rt.stream_synchronize(s0));
  for (int i = 0; i < 200 && !g_host_fn_ran; ++i) {
    struct timespec ts{0, 5000000};
    nanosleep(&ts, nullptr);
  }
  std::printf("host fn ran %d\n", g_host_fn_ran);
  void* native = nullptr;
  report("native default of 1", rt.native_stream(nullptr, 1, &native));
  std::printf("native device %d\n", static_cast<fake::Stream>(native)->device);
  int probed = 0;
  char msg[128];
  report("probe", rt.probe(&probed, msg, sizeof(msg)));
  std::printf("probed %d\n", probed);
  report("free p1", rt.free(p1));
  std::printf("current %d\n", fake::t_device);

  // ---- device graphs: the dialect with CUDA's stream capture ----
  report("graphs table", grt.init());
  std::printf("table %s caps %llu graphs %d\n", grt.name,
              static_cast<unsigned long long>(grt.capabilities), grt.graph_launch != nullptr);
  tfl_stream gs = nullptr;
  grt.set_device(1);
  grt.stream_create(&gs, 0);
  void* g1 = nullptr;
  grt.malloc(&g1, 64);
  grt.set_device(0);
  fake::g_log.clear();
  report("capture on the default stream", grt.graph_capture_begin(nullptr, 0));
  report("capture mode 7", grt.graph_capture_begin(gs, 7));
  report("capture begin", grt.graph_capture_begin(gs, TFL_CAPTURE_MODE_THREAD_LOCAL));
  int cs = -1;
  report("capture status", grt.stream_capture_status(gs, &cs));
  std::printf("status %d\n", cs);
  void* gp = nullptr;
  report("malloc while capturing", grt.malloc(&gp, 32));
  report("host fn while capturing", grt.launch_host_func(gs, [](void*) {}, nullptr));
  report("sync while capturing", grt.stream_synchronize(gs));
  grt.stream_capture_status(gs, &cs);
  std::printf("status %d\n", cs);
  tfl_graph graph = nullptr;
  report("end of the invalidated capture", grt.graph_capture_end(gs, &graph));
  grt.stream_capture_status(gs, &cs);
  std::printf("graph %d status %d\n", graph != nullptr, cs);

  // A capture that records: launched on the capture's device only, instantiated once.
  grt.graph_capture_begin(gs, TFL_CAPTURE_MODE_GLOBAL);
  fake::g_log.clear();
  report("captured copy", grt.memcpy_async(g1, host, 16, TFL_MEMCPY_HOST_TO_DEVICE, gs));
  report("end", grt.graph_capture_end(gs, &graph));
  report("launch on a stream of 0", grt.graph_launch(graph, nullptr));
  report("launch", grt.graph_launch(graph, gs));
  report("launch again", grt.graph_launch(graph, gs));
  report("destroy", grt.graph_destroy(graph));
  report("destroy again", grt.graph_destroy(graph));

  // ---- the optional members: the dialect with every one of them ----
  fake::g_fail_call = "fakeInit";
  fake::g_fail_status = fake::kIllegal;
  report("hooks init fails", hrt.set_device(0));
  report("hooks init retried", hrt.set_device(0));
  report("hooks set_device 2", hrt.set_device(2));
  report("hooks device_name 1", hrt.device_name(1, name, sizeof(name)));
  std::printf("name %s\n", name);
  report("hooks mem_get_info NULL", hrt.mem_get_info(nullptr, nullptr));
  void* h0 = nullptr;
  void* h1 = nullptr;
  void* pinned = nullptr;
  hrt.malloc(&h0, 32);
  hrt.set_device(1);
  hrt.malloc(&h1, 32);
  hrt.set_device(0);
  hrt.host_malloc(&pinned, 32);
  tfl_stream hs = nullptr;
  hrt.stream_create(&hs, 0);
  fake::g_log.clear();
  fake::g_fail_call = "fakeMalloc";
  fake::g_fail_status = fake::kInvalidValue;
  void* hq = nullptr;
  report("hooks malloc fails", hrt.malloc(&hq, 64));
  report("hooks memset past the end", hrt.memset_async(static_cast<char*>(h0) + 8, 0, 32, hs));
  report("hooks unknown kind", hrt.memcpy(h0, host, 4, static_cast<tfl_memcpy_kind>(7)));
  report("hooks pageable h2d", hrt.memcpy_async(h0, host, 16, TFL_MEMCPY_HOST_TO_DEVICE, hs));
  report("hooks pinned h2d", hrt.memcpy_async(h0, pinned, 16, TFL_MEMCPY_HOST_TO_DEVICE, hs));
  report("hooks sync d2d 1->0", hrt.memcpy(h0, h1, 16, TFL_MEMCPY_DEVICE_TO_DEVICE));
  report("hooks host fn", hrt.launch_host_func(hs, [](void*) {}, nullptr));
  tfl_event he = nullptr, untimed = nullptr;
  hrt.event_create(&he, 0);
  hrt.event_create(&untimed, TFL_EVENT_DISABLE_TIMING);
  fake::g_log.clear();
  report("hooks wait on a never-recorded event", hrt.stream_wait_event(hs, he));
  report("hooks query a never-recorded event", hrt.event_query(he));
  report("hooks elapsed never recorded", hrt.event_elapsed_ms(&ms, he, he));
  report("hooks elapsed untimed", hrt.event_elapsed_ms(&ms, he, untimed));
  tfl_stream hs1 = nullptr;
  hrt.set_device(1);
  hrt.stream_create(&hs1, 0);
  hrt.set_device(0);
  fake::g_log.clear();
  report("hooks record on a stream of 1", hrt.event_record(he, hs1));
  report("hooks wait on it", hrt.stream_wait_event(hs, he));
  report("hooks stream destroy", hrt.stream_destroy(hs));
  torch_fl::kit::CudaStyleRuntime<FakeHooks>::forget_after_fork();
  hrt.pointer_info(h0, &pk, &device);
  std::printf("pointer_info kind %d device %d\n", static_cast<int>(pk), device);
  report("hooks after fork", hrt.device_count(&n));
  return 0;
}
