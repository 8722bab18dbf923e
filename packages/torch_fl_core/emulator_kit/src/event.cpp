#include "emu_kit/event.h"

#include <chrono>

namespace emu_kit {

uint64_t Event::now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

void Event::record(Stream& stream, const char* name) {
  uint64_t gen;
  {
    std::lock_guard<std::mutex> lk(mu_);
    gen = ++recorded_;
    armed_ = true;
  }
  // The item holds the event: destroying the handle early is safe.
  std::shared_ptr<Event> self = shared_from_this();
  Stream* raw = &stream;
  WorkItem it;
  it.name = name;
  it.run = [self, gen, raw](char*, size_t) {
    std::string msg;
    const int pending = raw->pending_error(&msg);
    std::lock_guard<std::mutex> lk(self->mu_);
    if (gen > self->completed_) {
      self->completed_ = gen;
      self->stamp_ns_ = now_ns();
      self->error_ = pending;
      self->error_msg_ = msg;
    }
    self->cv_.notify_all();
    return 0;
  };
  stream.push(std::move(it));
}

void Event::block(Stream& stream, const char* name) {
  uint64_t gen;
  {
    std::lock_guard<std::mutex> lk(mu_);
    gen = armed_ ? recorded_ : 0;
  }
  if (gen == 0) return;
  std::shared_ptr<Event> self = shared_from_this();
  WorkItem it;
  it.name = name;
  it.run = [self, gen](char*, size_t) {
    std::unique_lock<std::mutex> lk(self->mu_);
    self->cv_.wait(lk, [&] { return self->completed_ >= gen; });
    return 0;
  };
  stream.push(std::move(it));
}

void Event::reset() {
  std::lock_guard<std::mutex> lk(mu_);
  armed_ = false;
  error_ = 0;
  cv_.notify_all();
}

bool Event::armed() {
  std::lock_guard<std::mutex> lk(mu_);
  return armed_;
}

bool Event::complete() {
  std::lock_guard<std::mutex> lk(mu_);
  return armed_ && completed_ >= recorded_;
}

int Event::synchronize(std::string* msg) {
  std::unique_lock<std::mutex> lk(mu_);
  if (!armed_) return 0;
  const uint64_t gen = recorded_;
  cv_.wait(lk, [&] { return completed_ >= gen; });
  if (error_ != 0) *msg = error_msg_;
  return error_;
}

uint64_t Event::stamp_ns() {
  std::lock_guard<std::mutex> lk(mu_);
  return stamp_ns_;
}

}  // namespace emu_kit
