#include "aclrt_host_functions.h"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>

#include "aclrt_device.h"
#include "aclrt_errors.h"
#include "aclrt_fork.h"

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

}  // namespace

tfl_status reporter_for(int device, uint64_t* thread_id) {
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
    return fail_acl("aclrtSetDevice", device, r->setup_status,
                    "on the host-function report thread");
  }
  *thread_id = r->thread_id.load(std::memory_order_acquire);
  return TFL_OK;
}

tfl_status subscribe(tfl_stream_st* st) {
  std::lock_guard<std::mutex> lock(st->subscribe_mutex);
  if (st->subscribed) return TFL_OK;
  uint64_t tid = 0;
  if (tfl_status s = reporter_for(st->device, &tid)) return s;
  ENTER_DEVICE(st->device);
  ACL_CHECK(st->device, aclrtSubscribeReport(tid, st->stream));
  st->subscribed = true;
  return TFL_OK;
}

tfl_status rt_launch_host_func(tfl_stream stream, tfl_host_fn fn, void* user_data) {
  if (!fn) return fail(TFL_ERROR_INVALID_VALUE, "launch_host_func: NULL function");
  READY();
  RESOLVE(st, stream);
  if (tfl_status s = subscribe(st)) return s;
  ENTER_DEVICE(st->device);
  ACL_CHECK(st->device, aclrtLaunchCallback(fn, user_data, ACL_CALLBACK_BLOCK, st->stream));
  return TFL_OK;
}

void forget_reporters_after_fork() {
  remake(g_reporter_mutex);
  new (&g_reporters) std::map<int, Reporter*>();
  g_stop_reporters.store(false);
}

}  // namespace tfl_aclrt
