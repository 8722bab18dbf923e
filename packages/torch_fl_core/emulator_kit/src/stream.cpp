#include "emu_kit/stream.h"

#include <cstdio>

namespace emu_kit {

Stream::Stream(int device, bool is_default, Mode mode, FreedWork freed)
    : device_(device), is_default_(is_default), mode_(mode), freed_(freed) {
  if (mode == Mode::worker) worker_ = std::thread([this] { loop(); });
}

Stream::~Stream() { shutdown(); }

void Stream::push(WorkItem item) {
  for (const AllocRef& a : item.allocs) a->pending.fetch_add(1);
  if (mode_ == Mode::inline_) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      ++enqueued_;
    }
    run(item);
    return;
  }
  std::lock_guard<std::mutex> lk(mu_);
  queue_.push_back(std::move(item));
  ++enqueued_;
  cv_.notify_all();
}

void Stream::loop() {
  for (;;) {
    WorkItem item;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return !queue_.empty() || stop_; });
      if (queue_.empty()) return;
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    run(item);
  }
}

void Stream::run(WorkItem& item) {
  char msg[768] = {0};
  int st = 0;
  for (const AllocRef& a : item.allocs) {
    if (!a->freed.load()) continue;
    st = freed_.status;
    if (a->device < 0)
      snprintf(msg, sizeof msg,
               "%s read/wrote pinned host memory %p (%zu bytes) that was %s'd before the stream "
               "reached the work",
               item.name.c_str(), reinterpret_cast<void*>(a->base), a->bytes, freed_.host_free);
    else
      snprintf(msg, sizeof msg,
               "%s read/wrote device memory %p (%zu bytes, device %d) that was %s'd before the "
               "stream reached the work",
               item.name.c_str(), reinterpret_cast<void*>(a->base), a->bytes, a->device,
               freed_.device_free);
    break;
  }
  if (st == 0 && item.run) st = item.run(msg, sizeof msg);
  if (item.cleanup) item.cleanup();
  for (const AllocRef& a : item.allocs) a->pending.fetch_sub(1);
  item.allocs.clear();
  std::lock_guard<std::mutex> lk(mu_);
  if (st != 0 && error_ == 0) {
    error_ = st;
    char full[1024];
    snprintf(full, sizeof full, "asynchronous failure of %s on device %d: %s (status %d)",
             item.name.c_str(), device_, msg[0] ? msg : "work failed", st);
    error_msg_ = full;
  }
  ++done_;
  cv_.notify_all();
}

int Stream::drain(std::string* msg) {
  std::unique_lock<std::mutex> lk(mu_);
  const uint64_t target = enqueued_;
  cv_.wait(lk, [&] { return done_ >= target; });
  const int e = error_;
  if (e != 0) {
    *msg = error_msg_;
    error_ = 0;
    error_msg_.clear();
  }
  return e;
}

bool Stream::idle() {
  std::lock_guard<std::mutex> lk(mu_);
  return done_ == enqueued_;
}

int Stream::pending_error(std::string* msg) {
  std::lock_guard<std::mutex> lk(mu_);
  *msg = error_msg_;
  return error_;
}

void Stream::shutdown() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  if (worker_.joinable() && worker_.get_id() != std::this_thread::get_id()) worker_.join();
}

}  // namespace emu_kit
