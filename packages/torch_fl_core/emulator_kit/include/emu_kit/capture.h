// Stream capture, for any SDK: while a stream captures, the work put on it is recorded into a
// graph instead of run, and a launch of the graph queues that work again on a stream, reading
// and writing the same memory. The rules follow CUDA's stream capture (which CANN's and MUSA's
// mirror):
//  - a capture begins on one stream (its origin); another stream joins it by waiting on an event
//    recorded in it, and its work is recorded from then on; the origin must wait on the joined
//    streams' last work before the capture ends. The work is kept in the order of the calls, a
//    valid order of the captured dependencies, so one stream replays it;
//  - a call that would wait for recorded work (synchronizing or querying a capturing stream or
//    an event recorded in a capture, a device-wide wait) fails and invalidates the capture, in
//    every mode; so does a call the capture mode forbids in the calling thread (an SDK's unsafe
//    calls: allocation, synchronous copies); later work on an invalidated capture fails, and
//    ending it gives no graph;
//  - a thread's own capture mode (exchange_thread_mode) relaxes those rules for it.
// The SDK maps each Refusal to its status. Not locked: its owner's lock guards it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "emu_kit/event.h"
#include "emu_kit/memory.h"
#include "emu_kit/stream.h"

namespace emu_kit {

// CUDA's values.
enum class CaptureMode : int { global = 0, thread_local_ = 1, relaxed = 2 };
enum class CaptureStatus : int { none = 0, active = 1, invalidated = 2 };

// Why a call was refused; the comments give CUDA's status.
enum class Refusal {
  none,
  forbidden,       // waits for recorded work, or the mode forbids it (StreamCaptureUnsupported)
  invalidated,     // work on, or the end of, a capture invalidated earlier (...Invalidated)
  merge,           // would merge two captures (...Merge)
  unmatched,       // ended on a stream that joined it, not its origin (...Unmatched)
  unjoined,        // ended before the origin waited on a joined stream's work (...Unjoined)
  isolation,       // a capturing stream waits on work outside the capture (...Isolation)
  captured_event,  // waits for or queries an event recorded in a capture (CapturedEvent)
  wrong_thread,    // a global or thread-local capture ended in another thread (...WrongThread)
  not_capturing,   // ended on a stream that does not capture (IllegalState)
};

struct Verdict {
  Refusal refusal = Refusal::none;
  std::string message;
  explicit operator bool() const { return refusal != Refusal::none; }
};

// One recorded piece of work, queued again at every launch.
struct GraphNode {
  std::string name;
  std::function<int(char* msg, size_t len)> run;  // copied into each launch
  std::vector<AllocRef> allocs;                   // pinned while a launch of it is queued
  EventRef event;                                 // set: records the event instead of `run`
};
using GraphBody = std::shared_ptr<const std::vector<GraphNode>>;

// What a capture made: its origin's device and its work.
struct CapturedGraph {
  int device = -1;
  GraphBody body;
};

// Queues the graph's work on `stream`, in capture order.
void launch_graph(const GraphBody& body, Stream& stream);

class Captures {
 public:
  // The SDK's names of the modes, in CaptureMode's order: messages name a mode as its users
  // spell it.
  using ModeNames = std::array<const char*, 3>;
  explicit Captures(ModeNames names = {"global", "thread-local", "relaxed"}) : names_(names) {}

  // Whether anything captures: every check below is free when nothing does.
  bool any() const { return !by_stream_.empty(); }
  CaptureStatus status(const Stream* s) const;
  // The origin of the capture `s` is in (itself, or the stream whose capture it joined), and of
  // the capture that last recorded `ev`: nullptr for none. They refuse nothing.
  const Stream* origin(const Stream* s) const;
  const Stream* event_origin(const Event* ev) const;

  // A capture on `s` (not a default stream: the caller refuses it).
  Verdict begin(const StreamRef& s, CaptureMode mode, const char* fn);
  // Ends the capture begun on `s`. It ends whatever the verdict, except when `s` does not
  // capture or only joined it (the origin ends it): its graph on none.
  Verdict end(const Stream* s, const char* fn, CapturedGraph* graph);

  // Work for `s`: false when `s` does not capture (the caller queues it); else it was recorded
  // (taken from `item`) or refused (*v; the item's cleanup ran).
  bool record(const Stream* s, const char* fn, WorkItem& item, Verdict* v);
  // A graph launched on `s`: its work recorded into the capture.
  bool record_graph(const Stream* s, const char* fn, const GraphBody& body, Verdict* v);
  // An event recorded on `s`: the event stands for that point of the capture from now on.
  // False: `s` does not capture (the caller records it).
  bool record_event(const Stream* s, const char* fn, const EventRef& ev, Verdict* v);
  // `s` waits on `ev`. False: an ordinary wait (the caller makes it); else handled here (a
  // stream joining the event's capture, a wait inside one capture) or refused.
  bool wait_event(const StreamRef& s, const char* fn, const EventRef& ev, Verdict* v);

  // Synchronizing, querying or destroying `s` while it captures: forbidden.
  Verdict stream_call(const Stream* s, const char* fn);
  // Waiting for or querying an event recorded in a capture: captured_event.
  Verdict event_call(const Event* ev, const char* fn);
  // A wait for every stream of `device`: forbidden while one of them captures, in every mode.
  Verdict device_wait(int device, const char* fn);
  // A call the capture modes forbid (allocation, synchronous copies): refused, invalidating the
  // captures that forbid it, in the threads their modes reach (device -1: any device's).
  Verdict unsafe_call(int device, const char* fn);
  // A call on `s` that its capture cannot record (`why`): forbidden, invalidating it.
  Verdict unrecordable(const Stream* s, const char* fn, const std::string& why);

  // The calling thread's mode (CUDA's cudaThreadExchangeStreamCaptureMode): the previous one.
  static CaptureMode exchange_thread_mode(CaptureMode mode);

 private:
  struct Member {
    StreamRef stream;
    uint64_t work = 0;    // how many pieces of work it put into the capture
    uint64_t joined = 0;  // how many of them the origin waits on
  };
  struct Capture {
    StreamRef origin;
    CaptureMode mode = CaptureMode::global;
    std::thread::id thread;  // the thread that began it
    std::vector<GraphNode> nodes;
    std::map<const Stream*, Member> members;  // the joined streams
    // Events last recorded in it: on which stream, after how much of its work.
    std::unordered_map<const Event*, std::pair<const Stream*, uint64_t>> events;
    std::vector<EventRef> held;  // keeps the events' addresses unique while listed
    bool invalidated = false;
    std::string reason;  // the first refusal: what ending it reports
  };
  using CaptureRef = std::shared_ptr<Capture>;

  const char* mode_name(CaptureMode m) const;
  CaptureRef of(const Stream* s) const;
  CaptureRef of_event(const Event* ev) const;
  bool reaches_this_thread(const Capture& c) const;
  static void invalidate(Capture& c, const std::string& reason);
  Verdict refuse(Refusal r, std::string message, Capture* c, Capture* other = nullptr);
  Verdict invalidated(const Capture& c, const char* fn) const;
  void bump(Capture& c, const Stream* s);
  void forget_event(const Event* ev);

  ModeNames names_;
  std::unordered_map<const Stream*, CaptureRef> by_stream_;  // origins and joined streams
};

}  // namespace emu_kit
