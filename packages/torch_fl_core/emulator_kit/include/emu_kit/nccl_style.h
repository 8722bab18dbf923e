// An emulated collective library of NCCL's shape (NCCL's functions and enum values under another
// prefix: Enflame's ECCL, Moore Threads' MCCL) over the communicator engine (comm*.h). A library
// is its names, its limits and how it reaches its runtime's streams and memory; nccl_style_api.h
// makes its extern "C" functions from a Library. Ranks are processes (or threads, one device
// each) of one machine.
//
// The contract every such library enforces: a communicator is made on the current device, one
// rank of a communicator per device, and takes only that device's streams and memory; every
// rank issues the same operations with the same count and type (else every rank's communicator
// fails, naming the rank that differs); a peer that never arrives fails the communicator within
// the timeout (the dialect's variable, seconds, else 60); a failure of an operation is the
// communicator's asynchronous error (CommGetAsyncError) and fails every later operation at once;
// CommAbort ends the waits of the communicator and its peers. Where the dialect says so, 64-bit
// types travel in broadcast and all-gather only, and a group aggregates one kind of operation
// (sends and receives are one kind).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <torch_fl/kit/nccl_style_values.h>

#include "emu_kit/comm.h"
#include "emu_kit/comm_ops.h"
#include "emu_kit/cuda_style.h"

namespace emu_kit::nccl {

// NCCL's values (kSuccess, kInt64, kSum, ...), which the libraries made in its image keep.
using namespace ::torch_fl::kit::nccl_style;

// What a library calls things and where it departs from NCCL. Strings live as long as the
// library (literals).
struct Dialect {
  const char* prefix;         // its functions' prefix: "eccl"; the communicators' tag
  const char* name;           // in messages: "ECCL"
  const char* device;         // "GCU": "not inside one live allocation of GCU 0"
  const char* device_label;   // "emulated GCU": "rank 0 of 2 (emulated GCU 0)"
  const char* set_device;     // the runtime's call that makes a device current: "topsSetDevice"
  const char* runtime_error;  // the string of kUnhandledRuntimeError: "unhandled tops error"
  const char* timeout_env;    // seconds a peer is waited for: "TOPS_EMU_ECCL_TIMEOUT"
  int version;                // GetVersion's answer
  // false: 64-bit types travel in broadcast and all-gather only (ECCL).
  bool reduces_64bit;
  // false: a group aggregates one kind of operation (ECCL).
  bool mixed_groups;
};

// The operations of one call or group as the runtime places them: one part per operation, its
// stream and the device memory it names.
struct Part {
  void* stream;
  std::vector<Range> ranges;
};
// host[p][i]: the host memory behind parts[p].ranges[i].
using HostWork = std::function<void(const std::vector<std::vector<void*>>& host)>;

// Why Runtime::run ran nothing.
struct Refusal {
  enum Kind { none, unknown_stream, bad_range, several_streams, capture_invalidated } kind = none;
  size_t part = 0;   // the part it is about
  size_t range = 0;  // bad_range: which of its ranges
  // none: the stream was capturing, so the work was recorded into its graph and runs at each
  // launch of the graph instead of once.
  bool recorded = false;
};

// How a library reaches the runtime whose streams and memory its calls name (its emulator's
// internals).
class Runtime {
 public:
  virtual ~Runtime() = default;
  // Counts a call of `fn`; the status injected for this call (0: none).
  virtual int enter(const char* fn) = 0;
  // The device current in the calling thread; -1 when there is none.
  virtual int current_device() = 0;
  // The device of `stream` (NULL: the current device's default stream); -1 for an unknown one.
  virtual int stream_device(void* stream) = 0;
  // Runs `work` once, in the order of the parts' streams, each range resolved on its stream's
  // device: before returning (inline streams; every rank's work waits for its peers there) or
  // later on the stream's worker; on a capturing stream, at each launch of the graph (and says
  // so: Refusal::recorded). The memory stays backed until the work ran. When it refuses,
  // nothing runs and `work` is dropped.
  virtual Refusal run(const std::vector<Part>& parts, HostWork work) = 0;
};

class Library {
 public:
  Library(Dialect dialect, std::unique_ptr<Runtime> runtime);
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  // The API in NCCL's argument order. `fn` is the function's name: each call is counted and may
  // be failed under it. Enums pass as int, handles as void*.
  int get_version(const char* fn, int* version);
  int get_unique_id(const char* fn, char* id);  // kUniqueIdBytes
  int comm_init_rank(const char* fn, void** comm, int nranks, const char* id, int rank);
  int comm_abort(const char* fn, void* comm);
  int comm_destroy(const char* fn, void* comm);
  int comm_get_async_error(const char* fn, void* comm, int* error);
  const char* error_string(int result) const;
  const char* last_error(void* comm);
  int comm_count(const char* fn, void* comm, int* count);
  int comm_device(const char* fn, void* comm, int* device);
  int comm_user_rank(const char* fn, void* comm, int* rank);
  int broadcast(const char* fn, const void* send, void* recv, size_t count, int type, int root,
                void* comm, void* stream);
  int reduce(const char* fn, const void* send, void* recv, size_t count, int type, int op, int root,
             void* comm, void* stream);
  int all_reduce(const char* fn, const void* send, void* recv, size_t count, int type, int op,
                 void* comm, void* stream);
  int reduce_scatter(const char* fn, const void* send, void* recv, size_t recv_count, int type,
                     int op, void* comm, void* stream);
  int all_gather(const char* fn, const void* send, void* recv, size_t send_count, int type,
                 void* comm, void* stream);
  int send(const char* fn, const void* buf, size_t count, int type, int peer, void* comm,
           void* stream);
  int recv(const char* fn, void* buf, size_t count, int type, int peer, void* comm, void* stream);
  int group_start(const char* fn);
  int group_end(const char* fn);

 private:
  struct Handle {
    CommPtr comm;
    std::string id;  // the unique id's bytes: one rank per device of it in this process
  };
  // One validated operation with its stream and the device memory it names.
  struct Pending {
    Op op;
    void* stream;
    std::vector<Range> ranges;
    const char* fn;
  };
  // The calling thread's group (one library per shared object).
  struct Group {
    int depth = 0;
    std::vector<Pending> ops;
  };
  static Group& group();

  // Counts the call; the injected status (recorded as the last error) or kSuccess.
  int enter(const char* fn);
  int fail(int code, const char* format, ...) __attribute__((format(printf, 3, 4)));
  Handle* lookup(void* comm);
  std::unique_ptr<Handle> take(void* comm);
  int one(const char* fn, void* comm, void* stream, OpKind kind, const void* send, void* recv,
          size_t count, int type, int op, int root, int peer, bool reduces);
  int submit(Pending p);
  int run(std::vector<Pending>& ops);

  const Dialect d_;
  const std::unique_ptr<Runtime> runtime_;
  Runtime& rt_;
  const std::string in_progress_;  // error_string(kInProgress)
  std::once_flag identified_;
  std::mutex mu_;
  std::unordered_map<void*, std::unique_ptr<Handle>> live_;
  std::set<std::pair<std::string, int>> devices_in_use_;
};

}  // namespace emu_kit::nccl
