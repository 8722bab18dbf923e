// Ordering two streams of a vendor runtime with a one-off SDK event (the peer
// event barrier), and running work on another stream in the caller's stream
// order: what a copy between devices needs when the caller's stream is not the
// one the SDK requires.
#pragma once

#include <torch_fl/runtime.h>

namespace torch_fl::kit {

// Makes `waiter` wait for the work queued so far on `signal`. `sdk` gives the
// three SDK steps, each with the named stream's device current, each returning
// a tfl_status (and recording the message):
//   sdk.record(signal, Event* out)  -- create an event and record it on signal
//   sdk.wait(waiter, Event event)   -- make waiter wait for it
//   sdk.destroy(signal, Event event) -- release it (after the wait was queued)
template <class Event, class Stream, class Sdk>
tfl_status stream_after(Stream* waiter, Stream* signal, const Sdk& sdk) {
  if (waiter == signal) return TFL_OK;
  Event event{};
  if (tfl_status st = sdk.record(signal, &event)) return st;
  const tfl_status st = sdk.wait(waiter, event);
  // Released whether or not the wait was queued: the SDK keeps what a queued
  // wait still needs.
  sdk.destroy(signal, event);
  return st;
}

// Runs `work(runner)` on `runner`, ordered after the work queued so far on
// `caller`, and orders `caller` after it: to the caller the work is in its own
// stream order. `after(waiter, signal)` is stream_after bound to the SDK.
template <class Stream, class After, class Work>
tfl_status run_in_order_of(Stream* caller, Stream* runner, const After& after, const Work& work) {
  if (tfl_status st = after(runner, caller)) return st;
  if (tfl_status st = work(runner)) return st;
  return after(caller, runner);
}

}  // namespace torch_fl::kit
