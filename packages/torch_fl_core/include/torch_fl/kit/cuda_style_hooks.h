// Optional members of a CUDA-style dialect (cuda_style_runtime.h), for an SDK that has CUDA's
// shape but not all of CUDA's rules (CANN's aclrt). Each is detected on the dialect; a dialect
// without it gets the CUDA behaviour, so topsrt and MUSA declare none of them.
//
// Functions:
//   Error init()  -- the SDK's once-per-process initialisation (aclInit), called under the
//     runtime's init lock before the device count; every table function initialises first.
//     `init_name` beside it. A failure is reported and retried on the next call.
//   std::string failure_text(const char* call, int device, Error e, const std::string& detail)
//     -- the message of a failed SDK call (device -1: none), in place of the runtime's
//     "<call>(...) on <device> N failed: <status string> (<type> N)[; detail]"; the dialect
//     also clears the SDK's sticky error there.
//   void device_name(int device, char* buf, size_t len) -- in place of kDeviceName's format.
// Flags (static constexpr bool):
//   kChecksArguments -- the runtime refuses what the SDK would accept and only fault on when
//     the work runs: a copy or memset past its allocation, an unknown copy kind, a device index
//     out of range, NULL out-parameters.
//   kUnorderedSyncCopies -- the SDK's synchronous copy waits for no stream: a copy between
//     devices drains both devices' default streams first (as every synchronous copy drains the
//     copying device's).
//   kPinnedAsyncCopies -- the SDK's async copy may only touch its own pinned host memory: with
//     other host memory the bytes move synchronously, after the stream's earlier work.
//   kDrainBeforeStreamDestroy -- the SDK destroys only a drained stream: stream_destroy
//     synchronizes it first.
//   kStreamCallbacks -- host functions always go through the SDK's stream callback
//     (launch_host_func, as for graphs), which holds later work on the stream until fn returned,
//     instead of the runtime's watcher thread, which does not.
//   kTracksEvents -- the SDK waits forever on an event never recorded and keeps an event in
//     the context of the device it was created on: the runtime treats a never-recorded event as
//     complete (CUDA's rule), re-creates an event recorded on another device's stream there, and
//     checks timing, recording and completion before measuring elapsed time.
#pragma once

#include <string>
#include <type_traits>

namespace torch_fl::kit {

template <class Sdk, class = void>
struct has_init : std::false_type {};
template <class Sdk>
struct has_init<Sdk, std::void_t<decltype(Sdk::init())>> : std::true_type {};

template <class Sdk, class = void>
struct has_failure_text : std::false_type {};
template <class Sdk>
struct has_failure_text<
    Sdk, std::void_t<decltype(Sdk::failure_text("", 0, typename Sdk::Error{}, std::string()))>>
    : std::true_type {};

template <class Sdk, class = void>
struct has_device_name : std::false_type {};
template <class Sdk>
struct has_device_name<Sdk, std::void_t<decltype(Sdk::device_name(0, nullptr, 0))>>
    : std::true_type {};

// has_<flag><Sdk>::value: the dialect's flag, false where it does not declare it.
#define TFL_KIT_DIALECT_FLAG(flag)        \
  template <class Sdk, class = void>      \
  struct has_##flag : std::false_type {}; \
  template <class Sdk>                    \
  struct has_##flag<Sdk, std::void_t<decltype(Sdk::flag)>> : std::bool_constant<Sdk::flag> {};

TFL_KIT_DIALECT_FLAG(kChecksArguments)
TFL_KIT_DIALECT_FLAG(kUnorderedSyncCopies)
TFL_KIT_DIALECT_FLAG(kPinnedAsyncCopies)
TFL_KIT_DIALECT_FLAG(kDrainBeforeStreamDestroy)
TFL_KIT_DIALECT_FLAG(kStreamCallbacks)
TFL_KIT_DIALECT_FLAG(kTracksEvents)

#undef TFL_KIT_DIALECT_FLAG

}  // namespace torch_fl::kit
