// Streams: one worker thread and FIFO queue each, so work really runs
// asynchronously and in order, like a hardware queue.
//
// Process exit: the stream registry (and with it every never-destroyed
// stream and its std::thread) is leaked on purpose. Joining workers from a
// static destructor could hang on a blocked task, and destroying a joinable
// std::thread calls std::terminate; an idle worker blocked on its condition
// variable simply ends with the process. The library must therefore never
// be dlclose()d while streams exist (core never unloads a runtime).
#include "sim_stream.h"

#include <unordered_map>
#include <vector>

#include "sim_config.h"
#include "sim_device.h"
#include "sim_entry.h"
#include "sim_errors.h"
#include "sim_event.h"
#include "sim_graph.h"

namespace torch_fl::sim {

// ---- Stream -----------------------------------------------------------------

Stream::Stream(int device, int priority) : device_(device), priority_(priority) {
  worker_ = std::thread([this] { run(); });
}

Stream::~Stream() { shutdown(); }

uint64_t Stream::enqueue(std::function<void()> task) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) {
    // Another thread destroyed the stream after this call resolved its
    // handle; the worker may already be gone, so the task would never run.
    throw Failure(TFL_ERROR_INVALID_HANDLE, "the stream was destroyed");
  }
  queue_.push_back(std::move(task));
  const uint64_t ticket = ++submitted_;
  work_cv_.notify_one();
  return ticket;
}

void Stream::wait(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [&] { return completed_ >= ticket; });
}

void Stream::synchronize() {
  if (completed_.load(std::memory_order_acquire) == submitted_.load(std::memory_order_acquire)) {
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t ticket = submitted_;
  done_cv_.wait(lock, [&] { return completed_ >= ticket; });
}

bool Stream::idle() {
  return completed_.load(std::memory_order_acquire) == submitted_.load(std::memory_order_acquire);
}

void Stream::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    work_cv_.notify_one();
  }
  if (!worker_.joinable()) return;
  if (worker_.get_id() == std::this_thread::get_id()) {
    worker_.detach();  // the last reference dropped by our own task: cannot join ourselves
  } else {
    worker_.join();
  }
}

void Stream::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and drained
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    try {
      task();
    } catch (...) {
      // A task has no one to report to; tasks validate before enqueueing, so
      // this is a host function misbehaving. Keep the stream alive.
    }
    task = nullptr;  // release captures (events, staging buffers) before signalling
    lock.lock();
    ++completed_;
    done_cv_.notify_all();
  }
}

// ---- registry ---------------------------------------------------------------

namespace {

struct StreamRegistry {
  std::mutex mutex;
  std::unordered_map<tfl_stream, StreamPtr> streams;  // created by stream_create
  // Per device, created once on first use and never replaced, so readers
  // need no lock (every host kernel asks for its device's default stream).
  std::vector<StreamPtr> defaults;
  std::unique_ptr<std::once_flag[]> defaults_once;
  // defaults[d].get() once created: the lock-free, refcount-free fast path
  // (the registry and its default streams are never destroyed).
  std::unique_ptr<std::atomic<Stream*>[]> default_raw;
};

// Leaked on purpose (see the file comment).
StreamRegistry& registry() {
  static StreamRegistry* r = [] {
    auto* reg = new StreamRegistry();
    reg->defaults.resize(static_cast<size_t>(config().device_count));
    reg->defaults_once.reset(new std::once_flag[static_cast<size_t>(config().device_count)]);
    reg->default_raw.reset(new std::atomic<Stream*>[static_cast<size_t>(config().device_count)]());
    return reg;
  }();
  return *r;
}

StreamPtr default_stream(int device) {
  StreamRegistry& reg = registry();
  const auto d = static_cast<size_t>(device);
  std::call_once(reg.defaults_once[d], [&] {
    reg.defaults[d] = std::make_shared<Stream>(device, 0);
    reg.default_raw[d].store(reg.defaults[d].get(), std::memory_order_release);
  });
  return reg.defaults[d];
}

// The default stream of `device` without a shared_ptr copy: it lives as long
// as the process, so a plain pointer is safe.
Stream* default_stream_raw(int device) {
  Stream* s = registry().default_raw[static_cast<size_t>(device)].load(std::memory_order_acquire);
  return s != nullptr ? s : default_stream(device).get();
}

}  // namespace

tfl_status resolve_stream(const char* fn, tfl_stream handle, StreamPtr* out) {
  if (handle == nullptr) {
    int device;
    const tfl_status st = checked_current_device(fn, &device);
    if (st != TFL_OK) return st;
    *out = default_stream(device);
    return TFL_OK;
  }
  StreamRegistry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  auto it = reg.streams.find(handle);
  if (it == reg.streams.end()) {
    return set_error(TFL_ERROR_INVALID_HANDLE, "%s: unknown or destroyed stream %p", fn,
                     static_cast<void*>(handle));
  }
  *out = it->second;
  return TFL_OK;
}

tfl_status resolve_stream_on(const char* fn, tfl_stream handle, int device, StreamPtr* out) {
  StreamPtr s;
  const tfl_status st = resolve_stream(fn, handle, &s);
  if (st != TFL_OK) return st;
  if (s->device() != device) {
    return set_error(TFL_ERROR_INVALID_HANDLE,
                     "%s: stream %p belongs to flagos sim device %d but the current device is %d",
                     fn, static_cast<void*>(handle), s->device(), device);
  }
  *out = std::move(s);
  return TFL_OK;
}

void synchronize_device_streams(int device) {
  std::vector<StreamPtr> streams{default_stream(device)};
  {
    StreamRegistry& reg = registry();
    std::lock_guard<std::mutex> lock(reg.mutex);
    for (const auto& [handle, s] : reg.streams) {
      if (s->device() == device) streams.push_back(s);
    }
  }
  // Never hold the registry lock while waiting: the work may take long.
  for (const StreamPtr& s : streams) s->synchronize();
}

// ---- table functions ------------------------------------------------------------

tfl_status sim_stream_create(tfl_stream* stream, int priority) {
  return entry(Call::stream_create, [&] {
    if (stream == nullptr)
      return set_error(TFL_ERROR_INVALID_VALUE, "tfl_stream_create: stream is NULL");
    int device;
    const tfl_status st = checked_current_device("tfl_stream_create", &device);
    if (st != TFL_OK) return st;
    // Priority is recorded but has no effect: each stream has its own thread.
    auto s = std::make_shared<Stream>(device, priority);
    StreamRegistry& reg = registry();
    std::lock_guard<std::mutex> lock(reg.mutex);
    reg.streams.emplace(s->handle(), s);
    *stream = s->handle();
    return TFL_OK;
  });
}

tfl_status sim_stream_destroy(tfl_stream stream) {
  return entry(Call::stream_destroy, [&] {
    if (stream == nullptr) {
      return set_error(TFL_ERROR_INVALID_HANDLE,
                       "tfl_stream_destroy: the default stream cannot be destroyed");
    }
    StreamPtr s;
    {
      StreamRegistry& reg = registry();
      std::lock_guard<std::mutex> lock(reg.mutex);
      auto it = reg.streams.find(stream);
      if (it == reg.streams.end()) {
        return set_error(TFL_ERROR_INVALID_HANDLE,
                         "tfl_stream_destroy: unknown or destroyed stream %p",
                         static_cast<void*>(stream));
      }
      // A capturing stream stays: its capture must end first.
      if (!it->second->capturing()) {
        s = std::move(it->second);
        reg.streams.erase(it);
      } else {
        s = it->second;
      }
    }
    if (s->capturing()) {
      const tfl_status st = check_stream_call("tfl_stream_destroy", *s);
      if (st != TFL_OK) return st;
      // The capture ended meanwhile: destroy it after all.
      StreamRegistry& reg = registry();
      std::lock_guard<std::mutex> lock(reg.mutex);
      if (reg.streams.erase(stream) == 0) {
        return set_error(TFL_ERROR_INVALID_HANDLE,
                         "tfl_stream_destroy: unknown or destroyed stream %p",
                         static_cast<void*>(stream));
      }
    }
    s->shutdown();  // drains queued work, then joins the worker
    return TFL_OK;
  });
}

tfl_status sim_stream_synchronize(tfl_stream stream) {
  return entry(Call::stream_synchronize, [&] {
    if (stream == nullptr) {
      // The default stream: core synchronizes it before every host kernel,
      // so skip resolve_stream's shared_ptr copy (two atomic RMWs).
      int device;
      const tfl_status st = checked_current_device("tfl_stream_synchronize", &device);
      if (st != TFL_OK) return st;
      default_stream_raw(device)->synchronize();
      return TFL_OK;
    }
    StreamPtr s;
    tfl_status st = resolve_stream("tfl_stream_synchronize", stream, &s);
    if (st != TFL_OK) return st;
    if ((st = check_stream_call("tfl_stream_synchronize", *s)) != TFL_OK) return st;
    s->synchronize();
    return TFL_OK;
  });
}

tfl_status sim_stream_query(tfl_stream stream) {
  return entry(Call::stream_query, [&] {
    StreamPtr s;
    tfl_status st = resolve_stream("tfl_stream_query", stream, &s);
    if (st != TFL_OK) return st;
    if ((st = check_stream_call("tfl_stream_query", *s)) != TFL_OK) return st;
    // NOT_READY is an answer, not a failure: last_error stays as it was.
    return s->idle() ? TFL_OK : TFL_ERROR_NOT_READY;
  });
}

tfl_status sim_stream_wait_event(tfl_stream stream, tfl_event event) {
  return entry(Call::stream_wait_event, [&] {
    StreamPtr s;
    tfl_status st = resolve_stream("tfl_stream_wait_event", stream, &s);
    if (st != TFL_OK) return st;
    EventPtr e;
    st = resolve_event("tfl_stream_wait_event", event, &e);
    if (st != TFL_OK) return st;
    // A wait that involves a capture is settled there (needless, or refused).
    if (capture_wait_event("tfl_stream_wait_event", *s, e, &st)) return st;
    // Wait for the event as recorded now; later records do not matter (CUDA).
    const uint64_t generation = e->latest_record();
    if (generation == 0 || e->reached(generation)) return TFL_OK;  // nothing to wait for
    s->enqueue([e, generation] { e->wait(generation); });
    return TFL_OK;
  });
}

tfl_status sim_launch_host_func(tfl_stream stream, tfl_host_fn fn, void* user_data) {
  return entry(Call::launch_host_func, [&] {
    if (fn == nullptr)
      return set_error(TFL_ERROR_INVALID_VALUE, "tfl_launch_host_func: fn is NULL");
    StreamPtr s;
    tfl_status st = resolve_stream("tfl_launch_host_func", stream, &s);
    if (st != TFL_OK) return st;
    // Captured, fn(user_data) runs at every launch of the graph.
    const auto call = [fn, user_data] { fn(user_data); };
    if (record_if_capturing("tfl_launch_host_func", *s, call, &st)) return st;
    s->enqueue(call);
    return TFL_OK;
  });
}

tfl_status sim_native_stream(tfl_stream stream, int device, void** out) {
  return entry(Call::native_stream, [&] {
    if (out == nullptr) return set_error(TFL_ERROR_INVALID_VALUE, "tfl_native_stream: out is NULL");
    tfl_status st = check_device("tfl_native_stream", device);
    if (st != TFL_OK) return st;
    if (stream == nullptr) {
      *out = default_stream_raw(device);
      return TFL_OK;
    }
    StreamPtr s;
    st = resolve_stream("tfl_native_stream", stream, &s);
    if (st != TFL_OK) return st;
    if (s->device() != device) {
      return set_error(TFL_ERROR_INVALID_HANDLE,
                       "tfl_native_stream: stream %p belongs to flagos sim device %d, not %d",
                       static_cast<void*>(stream), s->device(), device);
    }
    *out = s.get();
    return TFL_OK;
  });
}

}  // namespace torch_fl::sim
