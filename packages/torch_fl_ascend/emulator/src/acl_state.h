// libascendcl.so internals (not CANN API): the emulated NPUs over the emulator framework, and the
// conventions every aclrt entry point follows (counted, fault-injectable, needs aclInit, a failure
// leaves its message for aclGetRecentErrMsg).
//
// Device memory is host memory tagged with its device; a device pointer is valid only with its
// device current (or an enabled peer, for device-to-device copies). Every stream has a worker
// thread that runs its work in order, so queued work really completes later. The contract this
// enforces is what tests/test_emulator_runtime.py checks.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "acl/acl.h"
#include "acl/acl_mdl.h"
#include "emu_kit/event.h"
#include "emu_kit/handles.h"
#include "emu_kit/ledger.h"
#include "emu_kit/memory.h"
#include "emu_kit/stream.h"

namespace acl_emu {

using emu_kit::AllocRef;
using emu_kit::EventRef;

struct AclStream : emu_kit::Stream {
  AclStream(int32_t device, bool is_default, int32_t priority);
  const int32_t priority;
  // Set while aclmdlRICaptureBegin .. aclmdlRICaptureEnd: its tasks are recorded (acl_capture.h).
  std::atomic<bool> capturing{false};
  uint64_t subscriber = 0;  // host thread of aclrtSubscribeReport (guarded by State::mu)
  bool subscribed = false;
};
using StreamRef = std::shared_ptr<AclStream>;

// Host callbacks (aclrtLaunchCallback) waiting for their subscribed thread's aclrtProcessReport.
struct Report {
  aclrtCallback fn = nullptr;
  void* data = nullptr;
  bool done = false;
};
struct Reporter {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::shared_ptr<Report>> queue;
  int streams = 0;
};
using ReporterRef = std::shared_ptr<Reporter>;

struct Device {
  int32_t id = 0;
  emu_kit::DeviceMemory memory;
  StreamRef default_stream;
  std::vector<bool> peer;  // peer[d]: this device may access device d's memory
};

struct State {
  std::mutex mu;  // devices, allocations, reporters, subscriptions
  std::atomic<bool> initialized{false};
  bool ever_initialized = false;
  std::vector<Device> devices;
  emu_kit::AllocationMap allocs;       // device memory
  emu_kit::AllocationMap host_allocs;  // aclrtMallocHost blocks (device -1)
  emu_kit::HandleTable<AclStream> streams;
  emu_kit::HandleTable<emu_kit::Event> events;
  std::unordered_map<uint64_t, ReporterRef> reporters;
  emu_kit::Ledger ledger{"acl|Hccl", "CANN emulator"};  // libhccl.so counts through it too
};

State& S();
extern thread_local int32_t t_device;

void set_err(const std::string& msg);
aclError fail(aclError code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// A failure of queued work surfaced by a synchronising call: its message becomes the caller's.
aclError surface(const char* fn, aclError e, const std::string& msg);

bool valid_device(int32_t d);
// Caller holds S().mu. The default stream of a device, created on first use.
StreamRef default_stream_locked(int32_t dev);
// A stream handle (NULL: the current device's default stream); nullptr if unknown.
StreamRef lookup_stream(aclrtStream h);
EventRef lookup_event(aclrtEvent h);
// Every stream of a device, its default stream included.
std::vector<StreamRef> device_streams(int32_t dev);
aclError sync_stream(const char* fn, const StreamRef& st);

}  // namespace acl_emu

// Entry of every aclrt function: counts it, applies an injected fault, requires aclInit.
#define ACL_ENTER(name)                                                                  \
  do {                                                                                   \
    if (int injected_ = ::acl_emu::S().ledger.enter(name))                               \
      return ::acl_emu::fail(injected_, "%s: injected fault", name);                     \
    if (!::acl_emu::S().initialized)                                                     \
      return ::acl_emu::fail(ACL_ERROR_UNINITIALIZE, "%s: called before aclInit", name); \
  } while (0)

// Requires a current device; `dev` gets it.
#define ACL_NEED_DEVICE(name, dev)                                                 \
  int32_t dev = ::acl_emu::t_device;                                               \
  do {                                                                             \
    if (dev < 0)                                                                   \
      return ::acl_emu::fail(ACL_ERROR_RT_CONTEXT_NULL,                            \
                             "%s: no current device (call aclrtSetDevice)", name); \
  } while (0)

#define ACL_NEED_STREAM(name, var, handle)                                                        \
  ::acl_emu::StreamRef var = ::acl_emu::lookup_stream(handle);                                    \
  do {                                                                                            \
    if (!var) {                                                                                   \
      if ((handle) == nullptr)                                                                    \
        return ::acl_emu::fail(ACL_ERROR_RT_CONTEXT_NULL,                                         \
                               "%s: default stream needs a current device (call aclrtSetDevice)", \
                               name);                                                             \
      return ::acl_emu::fail(ACL_ERROR_INVALID_PARAM, "%s: stream %p is not a live stream", name, \
                             handle);                                                             \
    }                                                                                             \
  } while (0)
