// The sim collective table: argument checks, communicator handles, groups,
// and the stream tasks that run the operations.
//
// What sim implements of collective.h: every field; up to kMaxRanks ranks; every
// tfl_dtype with SUM, PROD, MIN, MAX, and AVG for floating types; one stream
// per group. Collectives cannot be captured into a device graph
// (TFL_ERROR_NOT_SUPPORTED on a capturing stream).
#include "sim_collective.h"

#include <cstdio>
#include <exception>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "emu_kit/comm.h"
#include "emu_kit/comm_ops.h"
#include "emu_kit/comm_reduce.h"
#include "emu_kit/comm_split.h"
#include "sim_config.h"
#include "sim_control.h"
#include "sim_device.h"
#include "sim_errors.h"
#include "sim_memory.h"
#include "sim_stream.h"

// libtorch_fl_sim.so's own runtime entry point (sim_runtime.cpp).
extern "C" const tfl_runtime_v1* tfl_runtime_get(uint32_t abi_version);

namespace torch_fl::sim {
namespace {

// The shared-memory engine is the emulator kit's (emu_kit/comm*.h): sim's
// streams, memory checks and table around it.
using namespace emu_kit;

// The prologue of every function: lazy init of the sim runtime (devices),
// and no C++ exception across the ABI.
template <class Body>
tfl_status coll_entry(const char* fn, Body&& body) noexcept {
  const tfl_status init = ensure_initialized();
  if (init != TFL_OK) {
    return set_error(TFL_ERROR_NOT_INITIALIZED, "%s: sim runtime failed to initialize: %s", fn,
                     init_error());
  }
  try {
    return body();
  } catch (const CommError& e) {
    return set_error(e.status(), "%s: %s", fn, e.what());
  } catch (const Failure& e) {
    return set_error(e.status(), "%s: %s", fn, e.what());
  } catch (const std::bad_alloc&) {
    return set_error(TFL_ERROR_OUT_OF_MEMORY, "%s: host out of memory", fn);
  } catch (const std::exception& e) {
    return set_error(TFL_ERROR_DEVICE, "%s: %s", fn, e.what());
  } catch (...) {
    return set_error(TFL_ERROR_DEVICE, "%s: unknown C++ exception", fn);
  }
}

// ---- communicator handles ----------------------------------------------------

std::mutex g_comms_mutex;
std::unordered_map<tfl_comm, CommPtr>& comms() {
  static auto* m = new std::unordered_map<tfl_comm, CommPtr>();  // leaked, as sim's streams
  return *m;
}

CommPtr find_comm(tfl_comm handle) {
  std::lock_guard<std::mutex> lock(g_comms_mutex);
  auto it = comms().find(handle);
  if (it == comms().end()) {
    char msg[96];
    std::snprintf(msg, sizeof msg, "unknown or destroyed communicator %p",
                  static_cast<void*>(handle));
    throw Failure(TFL_ERROR_INVALID_HANDLE, msg);
  }
  return it->second;
}

// ---- argument checks ---------------------------------------------------------

[[noreturn]] void refuse(tfl_status status, const Comm& c, const std::string& what) {
  throw Failure(status, c.who() + ": " + what);
}

size_t checked_bytes(const Comm& c, size_t count, int dtype, size_t times) {
  size_t bytes = 0;
  if (__builtin_mul_overflow(count, dtype_size(dtype), &bytes) ||
      __builtin_mul_overflow(bytes, times, &bytes)) {
    refuse(TFL_ERROR_INVALID_VALUE, c,
           "count " + std::to_string(count) + " of " + dtype_name(dtype) +
               (times > 1 ? " x " + std::to_string(times) + " ranks" : std::string()) +
               " overflows size_t");
  }
  return bytes;
}

// `ptr` must hold `bytes` of device memory of the communicator's device.
void check_buffer(const Comm& c, const char* role, const void* ptr, size_t bytes) {
  if (bytes == 0) return;
  char p[32];
  std::snprintf(p, sizeof p, "%p", ptr);
  if (ptr == nullptr) refuse(TFL_ERROR_INVALID_POINTER, c, std::string(role) + " buffer is NULL");
  const AllocationInfo a = find_allocation(ptr);
  if (a.kind != TFL_POINTER_DEVICE) {
    refuse(TFL_ERROR_INVALID_POINTER, c,
           std::string(role) + " buffer " + p +
               (a.kind == TFL_POINTER_HOST ? " is pinned host memory"
                                           : " is not device memory of the sim runtime") +
               "; collectives need memory of flagos sim device " + std::to_string(c.device()));
  }
  if (a.device != c.device()) {
    refuse(TFL_ERROR_INVALID_POINTER, c,
           std::string(role) + " buffer " + p + " is on flagos sim device " +
               std::to_string(a.device) + ", but the communicator's device is " +
               std::to_string(c.device()));
  }
  if (!a.contains(ptr, bytes)) {
    refuse(TFL_ERROR_INVALID_VALUE, c,
           std::string(role) + " buffer " + p + " + " + std::to_string(bytes) +
               " bytes runs past the end of its allocation (" + std::to_string(a.size) + " bytes)");
  }
}

void check_dtype(const Comm& c, int dtype) {
  if (dtype_size(dtype) == 0) {
    refuse(TFL_ERROR_INVALID_VALUE, c, "dtype " + std::to_string(dtype) + " is not a tfl_dtype");
  }
}

void check_reduction(const Comm& c, int dtype, int op) {
  check_dtype(c, dtype);
  if (op < 0 || op >= TFL_REDUCE_OP_COUNT) {
    refuse(TFL_ERROR_INVALID_VALUE, c, "op " + std::to_string(op) + " is not a tfl_reduce_op");
  }
  if (!reduction_supported(dtype, op)) {
    refuse(TFL_ERROR_NOT_SUPPORTED, c,
           std::string("the sim collective library has no ") + reduce_op_name(op) + " for " +
               dtype_name(dtype) + " (avg is for floating types)");
  }
}

void check_rank(const Comm& c, const char* role, int r) {
  if (r < 0 || r >= c.nranks()) {
    refuse(TFL_ERROR_INVALID_VALUE, c,
           std::string(role) + " " + std::to_string(r) + " is not a rank of the communicator");
  }
}

// ---- issuing: one task now, or later with the thread's group ------------------

struct Group {
  int depth = 0;
  std::vector<Op> ops;
  StreamPtr stream;
};
thread_local Group t_group;

void enqueue(const StreamPtr& s, std::vector<Op> ops) {
  for (const Op& o : ops) o.comm->begin_work();
  try {
    s->enqueue([ops = std::move(ops)] {
      run_ops(ops);
      for (const Op& o : ops) o.comm->end_work();
    });
  } catch (...) {
    for (const Op& o : ops) o.comm->end_work();
    throw;
  }
}

tfl_status issue(Op op, tfl_stream stream) {
  const Comm& c = *op.comm;
  StreamPtr s;
  tfl_status st = resolve_stream("stream", stream, &s);
  if (st != TFL_OK) refuse(st, c, last_error());
  if (s->device() != c.device()) {
    char msg[160];
    std::snprintf(msg, sizeof msg,
                  "stream %p is a stream of flagos sim device %d, but the communicator's device "
                  "is %d",
                  static_cast<void*>(stream), s->device(), c.device());
    refuse(TFL_ERROR_INVALID_HANDLE, c, msg);
  }
  if (s->capturing()) {
    refuse(TFL_ERROR_NOT_SUPPORTED, c,
           "sim collectives cannot be captured into a device graph (the stream captures)");
  }
  if (t_group.depth > 0) {
    if (t_group.stream && t_group.stream != s) {
      refuse(TFL_ERROR_NOT_SUPPORTED, c,
             "a sim group runs on one stream, and this group already uses another");
    }
    t_group.stream = s;
    t_group.ops.push_back(std::move(op));
    return TFL_OK;
  }
  std::vector<Op> ops;
  ops.push_back(std::move(op));
  enqueue(s, std::move(ops));
  return TFL_OK;
}

// The communicator, usable: not failed earlier (every later operation fails
// at once with that failure).
CommPtr usable_comm(tfl_comm handle) {
  CommPtr c = find_comm(handle);
  std::string why;
  const tfl_status st = c->error(&why);
  if (st != TFL_OK) refuse(st, *c, "the communicator failed earlier: " + why);
  return c;
}

Op make_op(OpKind kind, CommPtr comm, size_t count, int dtype) {
  Op o;
  o.kind = kind;
  o.comm = std::move(comm);
  o.count = count;
  o.dtype = dtype;
  return o;
}

// ---- table functions -------------------------------------------------------------

const char* coll_status_name(tfl_status status) { return status_name(status); }
const char* coll_last_error() { return last_error(); }

tfl_status coll_unique_id(tfl_comm_id* id) {
  return coll_entry("tfl_unique_id", [&] {
    if (id == nullptr) return set_error(TFL_ERROR_INVALID_VALUE, "tfl_unique_id: id is NULL");
    make_unique_id(id);
    return TFL_OK;
  });
}

void register_comm(const CommPtr& c, tfl_comm* out) {
  std::lock_guard<std::mutex> lock(g_comms_mutex);
  comms().emplace(c->handle(), c);
  *out = c->handle();
}

tfl_status coll_comm_init(tfl_comm* comm, int nranks, const tfl_comm_id* id, int rank, int device,
                          uint32_t timeout_ms) {
  return coll_entry("tfl_comm_init", [&] {
    const char* fn = "tfl_comm_init";
    if (comm == nullptr) return set_error(TFL_ERROR_INVALID_VALUE, "%s: comm is NULL", fn);
    if (id == nullptr) return set_error(TFL_ERROR_INVALID_VALUE, "%s: id is NULL", fn);
    if (nranks < 1) return set_error(TFL_ERROR_INVALID_VALUE, "%s: nranks %d < 1", fn, nranks);
    if (nranks > kMaxRanks) {
      return set_error(TFL_ERROR_NOT_SUPPORTED,
                       "%s: nranks %d: a sim communicator has at most %d ranks", fn, nranks,
                       kMaxRanks);
    }
    if (rank < 0 || rank >= nranks) {
      return set_error(TFL_ERROR_INVALID_VALUE, "%s: rank %d is not in [0, %d)", fn, rank, nranks);
    }
    tfl_status st = check_device(fn, device);
    if (st != TFL_OK) return st;
    if (timeout_ms == 0) {
      std::string why;
      if (!default_timeout_ms(&timeout_ms, &why)) {
        return set_error(TFL_ERROR_INVALID_VALUE, "%s: %s", fn, why.c_str());
      }
    }
    CommPtr c;
    try {
      c = std::make_shared<Comm>(nranks, *id, rank, device, timeout_ms);
    } catch (const CommError& e) {
      return set_error(e.status(), "%s (rank %d of %d): %s", fn, rank, nranks, e.what());
    }
    register_comm(c, comm);
    return TFL_OK;
  });
}

tfl_status coll_comm_split(tfl_comm comm, int color, int key, tfl_comm* out) {
  return coll_entry("tfl_comm_split", [&] {
    if (out == nullptr) return set_error(TFL_ERROR_INVALID_VALUE, "tfl_comm_split: out is NULL");
    CommPtr parent = usable_comm(comm);
    CommPtr c = split_comm(*parent, color, key);
    if (c == nullptr) {
      *out = nullptr;  // a negative color joins no communicator
    } else {
      register_comm(c, out);
    }
    return TFL_OK;
  });
}

tfl_status coll_comm_destroy(tfl_comm comm) {
  return coll_entry("tfl_comm_destroy", [&] {
    CommPtr c;
    {
      std::lock_guard<std::mutex> lock(g_comms_mutex);
      auto it = comms().find(comm);
      if (it == comms().end()) {
        return set_error(TFL_ERROR_INVALID_HANDLE,
                         "tfl_comm_destroy: unknown or destroyed communicator %p",
                         static_cast<void*>(comm));
      }
      c = std::move(it->second);
      comms().erase(it);
    }
    c->destroyed.store(true);
    c->drain();  // queued operations finish or fail within the timeout
    return TFL_OK;
  });
}

tfl_status coll_comm_abort(tfl_comm comm) {
  return coll_entry("tfl_comm_abort", [&] {
    find_comm(comm)->abort();
    return TFL_OK;
  });
}

tfl_status coll_comm_async_error(tfl_comm comm, tfl_status* error) {
  return coll_entry("tfl_comm_async_error", [&] {
    if (error == nullptr) {
      return set_error(TFL_ERROR_INVALID_VALUE, "tfl_comm_async_error: error is NULL");
    }
    std::string why;
    const tfl_status st = find_comm(comm)->error(&why);
    if (st != TFL_OK) set_error(st, "%s", why.c_str());
    *error = st;
    return TFL_OK;
  });
}

tfl_status coll_comm_info(tfl_comm comm, int* rank, int* nranks, int* device) {
  return coll_entry("tfl_comm_info", [&] {
    CommPtr c = find_comm(comm);
    if (rank != nullptr) *rank = c->rank();
    if (nranks != nullptr) *nranks = c->nranks();
    if (device != nullptr) *device = c->device();
    return TFL_OK;
  });
}

tfl_status coll_all_reduce(const void* send, void* recv, size_t count, int dtype, int op,
                           tfl_comm comm, tfl_stream stream) {
  return coll_entry("tfl_all_reduce", [&] {
    CommPtr c = usable_comm(comm);
    check_reduction(*c, dtype, op);
    const size_t bytes = checked_bytes(*c, count, dtype, 1);
    check_buffer(*c, "send", send, bytes);
    check_buffer(*c, "recv", recv, bytes);
    Op o = make_op(OpKind::all_reduce, c, count, dtype);
    o.send = send;
    o.recv = recv;
    o.op = op;
    return issue(std::move(o), stream);
  });
}

tfl_status coll_broadcast(const void* send, void* recv, size_t count, int dtype, int root,
                          tfl_comm comm, tfl_stream stream) {
  return coll_entry("tfl_broadcast", [&] {
    CommPtr c = usable_comm(comm);
    check_dtype(*c, dtype);
    check_rank(*c, "root", root);
    const size_t bytes = checked_bytes(*c, count, dtype, 1);
    if (c->rank() == root) check_buffer(*c, "send", send, bytes);
    check_buffer(*c, "recv", recv, bytes);
    Op o = make_op(OpKind::broadcast, c, count, dtype);
    o.send = send;
    o.recv = recv;
    o.root = root;
    return issue(std::move(o), stream);
  });
}

tfl_status coll_reduce(const void* send, void* recv, size_t count, int dtype, int op, int root,
                       tfl_comm comm, tfl_stream stream) {
  return coll_entry("tfl_reduce", [&] {
    CommPtr c = usable_comm(comm);
    check_reduction(*c, dtype, op);
    check_rank(*c, "root", root);
    const size_t bytes = checked_bytes(*c, count, dtype, 1);
    check_buffer(*c, "send", send, bytes);
    if (c->rank() == root) check_buffer(*c, "recv", recv, bytes);
    Op o = make_op(OpKind::reduce, c, count, dtype);
    o.send = send;
    o.recv = recv;
    o.op = op;
    o.root = root;
    return issue(std::move(o), stream);
  });
}

tfl_status coll_all_gather(const void* send, void* recv, size_t count, int dtype, tfl_comm comm,
                           tfl_stream stream) {
  return coll_entry("tfl_all_gather", [&] {
    CommPtr c = usable_comm(comm);
    check_dtype(*c, dtype);
    const size_t all = checked_bytes(*c, count, dtype, static_cast<size_t>(c->nranks()));
    check_buffer(*c, "send", send, all / static_cast<size_t>(c->nranks()));
    check_buffer(*c, "recv", recv, all);
    Op o = make_op(OpKind::all_gather, c, count, dtype);
    o.send = send;
    o.recv = recv;
    return issue(std::move(o), stream);
  });
}

tfl_status coll_reduce_scatter(const void* send, void* recv, size_t count, int dtype, int op,
                               tfl_comm comm, tfl_stream stream) {
  return coll_entry("tfl_reduce_scatter", [&] {
    CommPtr c = usable_comm(comm);
    check_reduction(*c, dtype, op);
    const size_t all = checked_bytes(*c, count, dtype, static_cast<size_t>(c->nranks()));
    check_buffer(*c, "send", send, all);
    check_buffer(*c, "recv", recv, all / static_cast<size_t>(c->nranks()));
    Op o = make_op(OpKind::reduce_scatter, c, count, dtype);
    o.send = send;
    o.recv = recv;
    o.op = op;
    return issue(std::move(o), stream);
  });
}

tfl_status coll_all_to_all(const void* send, void* recv, size_t count, int dtype, tfl_comm comm,
                           tfl_stream stream) {
  return coll_entry("tfl_all_to_all", [&] {
    CommPtr c = usable_comm(comm);
    check_dtype(*c, dtype);
    const size_t all = checked_bytes(*c, count, dtype, static_cast<size_t>(c->nranks()));
    check_buffer(*c, "send", send, all);
    check_buffer(*c, "recv", recv, all);
    const auto s = reinterpret_cast<uintptr_t>(send);
    const auto r = reinterpret_cast<uintptr_t>(recv);
    if (all > 0 && s < r + all && r < s + all) {
      refuse(TFL_ERROR_INVALID_VALUE, *c, "all_to_all's send and recv buffers overlap");
    }
    Op o = make_op(OpKind::all_to_all, c, count, dtype);
    o.send = send;
    o.recv = recv;
    return issue(std::move(o), stream);
  });
}

tfl_status coll_send(const void* buf, size_t count, int dtype, int peer, tfl_comm comm,
                     tfl_stream stream) {
  return coll_entry("tfl_send", [&] {
    CommPtr c = usable_comm(comm);
    check_dtype(*c, dtype);
    check_rank(*c, "peer", peer);
    check_buffer(*c, "send", buf, checked_bytes(*c, count, dtype, 1));
    Op o = make_op(OpKind::send, c, count, dtype);
    o.send = buf;
    o.peer = peer;
    return issue(std::move(o), stream);
  });
}

tfl_status coll_recv(void* buf, size_t count, int dtype, int peer, tfl_comm comm,
                     tfl_stream stream) {
  return coll_entry("tfl_recv", [&] {
    CommPtr c = usable_comm(comm);
    check_dtype(*c, dtype);
    check_rank(*c, "peer", peer);
    check_buffer(*c, "recv", buf, checked_bytes(*c, count, dtype, 1));
    Op o = make_op(OpKind::recv, c, count, dtype);
    o.recv = buf;
    o.peer = peer;
    return issue(std::move(o), stream);
  });
}

tfl_status coll_group_start() {
  return coll_entry("tfl_group_start", [] {
    ++t_group.depth;
    return TFL_OK;
  });
}

tfl_status coll_group_end() {
  return coll_entry("tfl_group_end", [] {
    if (t_group.depth == 0) {
      return set_error(TFL_ERROR_INVALID_VALUE, "tfl_group_end: no group_start on this thread");
    }
    if (--t_group.depth > 0) return TFL_OK;
    std::vector<Op> ops = std::move(t_group.ops);
    StreamPtr s = std::move(t_group.stream);
    t_group = Group{};
    std::string destroyed;
    std::vector<Op> live;
    for (Op& o : ops) {
      if (o.comm->destroyed.load()) {
        destroyed = o.comm->who();
      } else {
        live.push_back(std::move(o));
      }
    }
    if (!live.empty()) {
      if (s->capturing()) {
        return set_error(TFL_ERROR_NOT_SUPPORTED,
                         "tfl_group_end: sim collectives cannot be captured into a device graph");
      }
      enqueue(s, std::move(live));
    }
    if (!destroyed.empty()) {
      return set_error(TFL_ERROR_INVALID_HANDLE,
                       "tfl_group_end: the communicator of %s was destroyed inside the group; its "
                       "operations were dropped",
                       destroyed.c_str());
    }
    return TFL_OK;
  });
}

// Sim's collectives move sim device memory: they run on sim's runtime only.
tfl_status coll_attach_runtime(const tfl_runtime_v1* runtime) {
  return coll_entry("tfl_attach_runtime", [&]() -> tfl_status {
    if (runtime == nullptr) {
      return set_error(TFL_ERROR_INVALID_VALUE, "tfl_attach_runtime: runtime is NULL");
    }
    if (runtime != tfl_runtime_get(TFL_RUNTIME_ABI_VERSION)) {
      return set_error(TFL_ERROR_INVALID_VALUE,
                       "tfl_attach_runtime: sim's collectives run on sim's runtime only (the "
                       "process runs runtime '%s')",
                       runtime->name ? runtime->name : "?");
    }
    return TFL_OK;
  });
}

const tfl_collective_v1 kTable = {
    /*abi_version=*/TFL_COLLECTIVE_ABI_VERSION,
    /*struct_size=*/sizeof(tfl_collective_v1),
    /*name=*/"sim",
    /*status_name=*/coll_status_name,
    /*last_error=*/coll_last_error,
    /*unique_id=*/coll_unique_id,
    /*comm_init=*/coll_comm_init,
    /*comm_split=*/coll_comm_split,
    /*comm_destroy=*/coll_comm_destroy,
    /*comm_abort=*/coll_comm_abort,
    /*comm_async_error=*/coll_comm_async_error,
    /*comm_info=*/coll_comm_info,
    /*all_reduce=*/coll_all_reduce,
    /*broadcast=*/coll_broadcast,
    /*reduce=*/coll_reduce,
    /*all_gather=*/coll_all_gather,
    /*reduce_scatter=*/coll_reduce_scatter,
    /*all_to_all=*/coll_all_to_all,
    /*send=*/coll_send,
    /*recv=*/coll_recv,
    /*group_start=*/coll_group_start,
    /*group_end=*/coll_group_end,
    /*attach_runtime=*/coll_attach_runtime,
};

}  // namespace

const tfl_collective_v1* collective_table() noexcept { return &kTable; }

}  // namespace torch_fl::sim

extern "C" TFL_SIM_EXPORT const tfl_collective_v1* tfl_collective_get(uint32_t abi_version) {
  return abi_version == TFL_COLLECTIVE_ABI_VERSION ? torch_fl::sim::collective_table() : nullptr;
}
