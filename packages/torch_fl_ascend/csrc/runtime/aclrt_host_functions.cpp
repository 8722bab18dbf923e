#include "aclrt_host_functions.h"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <thread>

namespace tfl_aclrt {

// One report thread per device serves aclrtProcessReport.
// CANN lets one thread serve several streams of one device, never streams of two devices. So a
// device's host functions run one at a time, in the order their streams reach them (as with
// CUDA's callback thread): one that blocks holds back the host functions of the device's other
// streams, never their device work.

namespace {

struct Reporter {
  std::atomic<uint64_t> thread_id{0};
  std::atomic<bool> started{false};
  std::atomic<bool> finished{false};
  aclError setup_status = ACL_SUCCESS;
};

std::mutex g_reporter_mutex;
std::map<int, Reporter*> g_reporters;
std::atomic<bool> g_stop_reporters{false};

// Streams subscribed to a report thread (by the thread's id), up to their destruction.
std::mutex g_subscribed_mutex;
std::map<aclrtStream, uint64_t> g_subscribed;

void reporter_main(int device, Reporter* r) {
  // Callbacks run in the context of the stream's device.
  r->setup_status = aclrtSetDevice(device);
  r->thread_id.store(static_cast<uint64_t>(pthread_self()), std::memory_order_release);
  r->started.store(true, std::memory_order_release);
  while (r->setup_status == ACL_SUCCESS && !g_stop_reporters.load(std::memory_order_acquire)) {
    // A timeout returns so that process exit can stop the thread; failing calls (no stream
    // subscribed yet) must not spin.
    const aclError e = aclrtProcessReport(100);
    if (e != ACL_SUCCESS && e != ACL_ERROR_RT_REPORT_TIMEOUT) {
      (void)aclGetRecentErrMsg();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  r->finished.store(true, std::memory_order_release);
}

// At exit, report threads stop within one aclrtProcessReport timeout; one stuck in a host
// function is left behind rather than hanging the exit.
void stop_reporters() {
  g_stop_reporters.store(true, std::memory_order_release);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  std::lock_guard<std::mutex> lock(g_reporter_mutex);
  for (auto& kv : g_reporters) {
    while (!kv.second->finished.load(std::memory_order_acquire) &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
}

// The report thread of `device`, started on first use.
aclError reporter_for(int device, uint64_t* thread_id, const char** call) {
  std::lock_guard<std::mutex> lock(g_reporter_mutex);
  Reporter*& r = g_reporters[device];
  if (!r) {
    static std::once_flag exit_hook;
    std::call_once(exit_hook, [] { std::atexit(stop_reporters); });
    r = new Reporter();
    std::thread(reporter_main, device, r).detach();
    while (!r->started.load(std::memory_order_acquire)) std::this_thread::yield();
  }
  if (r->setup_status != ACL_SUCCESS) {
    *call = "aclrtSetDevice";  // on the report thread
    return r->setup_status;
  }
  *thread_id = r->thread_id.load(std::memory_order_acquire);
  return ACL_SUCCESS;
}

}  // namespace

aclError launch_callback(aclrtStream stream, aclrtCallback fn, void* user_data, const char** call) {
  {
    std::lock_guard<std::mutex> lock(g_subscribed_mutex);
    if (!g_subscribed.count(stream)) {
      *call = "aclrtGetDevice";
      int32_t device = -1;
      if (aclError e = aclrtGetDevice(&device)) return e;
      uint64_t tid = 0;
      if (aclError e = reporter_for(device, &tid, call)) return e;
      *call = "aclrtSubscribeReport";
      if (aclError e = aclrtSubscribeReport(tid, stream)) return e;
      g_subscribed[stream] = tid;
    }
  }
  *call = "aclrtLaunchCallback";
  return aclrtLaunchCallback(fn, user_data, ACL_CALLBACK_BLOCK, stream);
}

aclError unsubscribe(aclrtStream stream, const char** call) {
  std::lock_guard<std::mutex> lock(g_subscribed_mutex);
  auto it = g_subscribed.find(stream);
  if (it == g_subscribed.end()) return ACL_SUCCESS;
  *call = "aclrtUnSubscribeReport";
  if (aclError e = aclrtUnSubscribeReport(it->second, stream)) return e;
  g_subscribed.erase(it);
  return ACL_SUCCESS;
}

void forget_reporters_after_fork() {
  new (&g_reporter_mutex) std::mutex();
  new (&g_reporters) std::map<int, Reporter*>();
  new (&g_subscribed_mutex) std::mutex();
  new (&g_subscribed) std::map<aclrtStream, uint64_t>();
  g_stop_reporters.store(false);
}

}  // namespace tfl_aclrt
