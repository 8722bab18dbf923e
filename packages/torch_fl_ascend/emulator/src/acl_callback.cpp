// Host callbacks: aclrtLaunchCallback queues work that hands the callback to the host thread
// subscribed to the stream (aclrtSubscribeReport), which runs it in aclrtProcessReport.
#include <pthread.h>

#include <chrono>

#include "acl_capture.h"
#include "acl_state.h"

using namespace acl_emu;

extern "C" {

aclError aclrtSubscribeReport(uint64_t threadId, aclrtStream stream) {
  ACL_ENTER("aclrtSubscribeReport");
  ACL_NEED_STREAM("aclrtSubscribeReport", st, stream);
  std::lock_guard<std::mutex> lk(S().mu);
  if (st->subscribed)
    return fail(ACL_ERROR_RT_STREAM_SUBSCRIBE,
                "aclrtSubscribeReport: stream %p already has a subscribed thread", stream);
  ReporterRef& r = S().reporters[threadId];
  if (!r) r = std::make_shared<Reporter>();
  r->streams += 1;
  st->subscriber = threadId;
  st->subscribed = true;
  return ACL_SUCCESS;
}

aclError aclrtUnSubscribeReport(uint64_t threadId, aclrtStream stream) {
  ACL_ENTER("aclrtUnSubscribeReport");
  ACL_NEED_STREAM("aclrtUnSubscribeReport", st, stream);
  std::lock_guard<std::mutex> lk(S().mu);
  if (!st->subscribed || st->subscriber != threadId)
    return fail(ACL_ERROR_RT_STREAM_SUBSCRIBE,
                "aclrtUnSubscribeReport: thread %llu is not subscribed to stream %p",
                static_cast<unsigned long long>(threadId), stream);
  st->subscribed = false;
  auto it = S().reporters.find(threadId);
  if (it != S().reporters.end() && --it->second->streams == 0) S().reporters.erase(it);
  return ACL_SUCCESS;
}

aclError aclrtLaunchCallback(aclrtCallback fn, void* userData, aclrtCallbackBlockType blockType,
                             aclrtStream stream) {
  ACL_ENTER("aclrtLaunchCallback");
  if (!fn) return fail(ACL_ERROR_INVALID_PARAM, "aclrtLaunchCallback: fn is NULL");
  if (blockType != ACL_CALLBACK_NO_BLOCK && blockType != ACL_CALLBACK_BLOCK)
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtLaunchCallback: blockType %d unknown",
                static_cast<int>(blockType));
  ACL_NEED_STREAM("aclrtLaunchCallback", st, stream);
  ReporterRef r;
  {
    std::lock_guard<std::mutex> lk(S().mu);
    if (st->subscribed) r = S().reporters[st->subscriber];
  }
  if (!r)
    return fail(ACL_ERROR_RT_STREAM_NO_CB_REG,
                "aclrtLaunchCallback: no thread subscribed to stream %p (aclrtSubscribeReport)",
                stream);
  const bool block = blockType == ACL_CALLBACK_BLOCK;
  emu_kit::WorkItem it;
  it.name = "aclrtLaunchCallback";
  it.run = [r, fn, userData, block](char*, size_t) {
    auto rep = std::make_shared<Report>();
    rep->fn = fn;
    rep->data = userData;
    std::unique_lock<std::mutex> lk(r->mu);
    r->queue.push_back(rep);
    r->cv.notify_all();
    // BLOCK: later work on this stream waits for the host to have run the callback.
    if (block) r->cv.wait(lk, [&] { return rep->done; });
    return ACL_SUCCESS;
  };
  return enqueue("aclrtLaunchCallback", st, std::move(it));
}

aclError aclrtProcessReport(int32_t timeout) {
  ACL_ENTER("aclrtProcessReport");
  if (timeout < -1)
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtProcessReport: timeout %d (ms, -1 = forever)",
                timeout);
  const uint64_t self = static_cast<uint64_t>(pthread_self());
  ReporterRef r;
  {
    std::lock_guard<std::mutex> lk(S().mu);
    auto it = S().reporters.find(self);
    if (it != S().reporters.end()) r = it->second;
  }
  if (!r)
    return fail(ACL_ERROR_RT_THREAD_SUBSCRIBE,
                "aclrtProcessReport: the calling thread is subscribed to no stream");
  std::shared_ptr<Report> rep;
  {
    std::unique_lock<std::mutex> lk(r->mu);
    auto ready = [&] { return !r->queue.empty(); };
    if (timeout < 0) {
      r->cv.wait(lk, ready);
    } else if (!r->cv.wait_for(lk, std::chrono::milliseconds(timeout), ready)) {
      return fail(ACL_ERROR_RT_REPORT_TIMEOUT, "aclrtProcessReport: no callback within %d ms",
                  timeout);
    }
    rep = r->queue.front();
    r->queue.pop_front();
  }
  rep->fn(rep->data);
  std::lock_guard<std::mutex> lk(r->mu);
  rep->done = true;
  r->cv.notify_all();
  return ACL_SUCCESS;
}

}  // extern "C"
