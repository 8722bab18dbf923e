// The runtime's state, its lookups and its error conventions.
#include "acl_state.h"

#include <pthread.h>

#include <cstdarg>
#include <cstdio>

namespace acl_emu {

thread_local int32_t t_device = -1;
thread_local std::string t_err;  // message of the latest failure on this thread

namespace {

// Never destroyed: stream worker threads may still be parked at process exit.
State*& state_ptr() {
  static State* s = new State();
  return s;
}

// A forked child gets no worker threads and, like a process on the real driver, none of its
// parent's devices, memory or streams: it starts uninitialised (aclInit again). The parent's
// state is abandoned, not destroyed: its locks may be held by threads that did not fork.
void after_fork_in_child() {
  state_ptr() = new State();
  t_device = -1;
  t_err.clear();
}
__attribute__((constructor)) void register_fork_handler() {
  pthread_atfork(nullptr, nullptr, after_fork_in_child);
}

}  // namespace

State& S() { return *state_ptr(); }

AclStream::AclStream(int32_t device, bool is_default, int32_t priority_)
    : emu_kit::Stream(
          device, is_default, Mode::worker,
          emu_kit::FreedWork{ACL_ERROR_RT_AICORE_EXCEPTION, "aclrtFree", "aclrtFreeHost"}),
      priority(priority_) {}

void set_err(const std::string& msg) { t_err = msg; }

aclError fail(aclError code, const char* fmt, ...) {
  char buf[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  set_err(std::string(buf) + " (CANN emulator, status " + std::to_string(code) + ")");
  return code;
}

aclError surface(const char* fn, aclError e, const std::string& msg) {
  if (e == ACL_SUCCESS) return e;
  set_err(std::string(fn) + ": " + msg + " (CANN emulator)");
  return e;
}

bool valid_device(int32_t d) { return d >= 0 && static_cast<size_t>(d) < S().devices.size(); }

StreamRef default_stream_locked(int32_t dev) {
  Device& d = S().devices[static_cast<size_t>(dev)];
  if (!d.default_stream) d.default_stream = std::make_shared<AclStream>(dev, true, 0);
  return d.default_stream;
}

StreamRef lookup_stream(aclrtStream h) {
  if (h == nullptr) {
    std::lock_guard<std::mutex> lk(S().mu);
    if (t_device < 0 || !valid_device(t_device)) return nullptr;
    return default_stream_locked(t_device);
  }
  return S().streams.find(h);
}

EventRef lookup_event(aclrtEvent h) { return S().events.find(h); }

std::vector<StreamRef> device_streams(int32_t dev) {
  std::vector<StreamRef> mine;
  {
    std::lock_guard<std::mutex> lk(S().mu);
    if (S().devices[static_cast<size_t>(dev)].default_stream)
      mine.push_back(S().devices[static_cast<size_t>(dev)].default_stream);
  }
  for (StreamRef& st : S().streams.all())
    if (st->device() == dev) mine.push_back(std::move(st));
  return mine;
}

aclError sync_stream(const char* fn, const StreamRef& st) {
  std::string msg;
  aclError e = st->drain(&msg);
  return surface(fn, e, msg);
}

}  // namespace acl_emu

extern "C" {

// Each message is handed out once (CANN clears it when read).
const char* aclGetRecentErrMsg() {
  thread_local std::string read;  // what it handed out last
  if (acl_emu::t_err.empty()) return nullptr;
  read = std::move(acl_emu::t_err);
  acl_emu::t_err.clear();
  return read.c_str();
}

}  // extern "C"
