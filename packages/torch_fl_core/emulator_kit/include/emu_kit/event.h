// An event marks a point of a stream: it completes when the stream passes its latest record,
// stamped with the time it did and carrying the stream's asynchronous error of that moment.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "emu_kit/stream.h"

namespace emu_kit {

class Event : public std::enable_shared_from_this<Event> {
 public:
  Event(unsigned flags, bool timing) : flags_(flags), timing_(timing) {}
  virtual ~Event() = default;

  unsigned flags() const { return flags_; }
  bool timing() const { return timing_; }

  // Arms the event at the current end of `stream` (`name` labels the work item).
  void record(Stream& stream, const char* name);
  // Makes work pushed later on `stream` wait for the latest record; nothing when unarmed.
  void block(Stream& stream, const char* name);
  // Disarms it: a never-recorded event has nothing to wait for.
  void reset();
  bool armed();
  // Armed, and its stream passed the latest record.
  bool complete();
  // Waits for the latest record; the asynchronous error it carries (0: none), message in *msg.
  int synchronize(std::string* msg);
  uint64_t stamp_ns();

  static uint64_t now_ns();

 private:
  const unsigned flags_;
  const bool timing_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = false;      // recorded since creation or the last reset
  uint64_t recorded_ = 0;   // generation of the latest record
  uint64_t completed_ = 0;  // generation the stream has passed
  uint64_t stamp_ns_ = 0;
  int error_ = 0;
  std::string error_msg_;
};
using EventRef = std::shared_ptr<Event>;

}  // namespace emu_kit
