// An emulated NCCL-style collective library (emu_kit/nccl_style.h): argument checks, communicator
// handles, per-thread groups, and operations handed to the runtime with their memory.
#include "emu_kit/nccl_style.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "emu_kit/comm_reduce.h"

namespace emu_kit::nccl {

namespace {

thread_local std::string t_last;  // LastError(NULL); one library per shared object

int code_of(tfl_status st) {
  switch (st) {
    case TFL_OK:
      return kSuccess;
    case TFL_ERROR_TIMEOUT:
    case TFL_ERROR_ABORTED:
      return kRemoteError;
    case TFL_ERROR_INVALID_VALUE:
      return kInvalidArgument;
    case TFL_ERROR_NOT_SUPPORTED:
      return kInvalidUsage;
    default:
      return kInternalError;
  }
}

// The engine's element type; -1 for those the emulator does not move (uint32, uint64).
int engine_dtype(int t) {
  static const int kDtypes[kNumTypes] = {
      TFL_DTYPE_I8,  TFL_DTYPE_U8,  TFL_DTYPE_I32, -1, TFL_DTYPE_I64, -1, TFL_DTYPE_F16,
      TFL_DTYPE_F32, TFL_DTYPE_F64, TFL_DTYPE_BF16};
  return t >= 0 && t < kNumTypes ? kDtypes[t] : -1;
}

const char* type_name(int t) {
  static const char* names[kNumTypes] = {"int8",   "uint8",   "int32",   "uint32",  "int64",
                                         "uint64", "float16", "float32", "float64", "bfloat16"};
  return t >= 0 && t < kNumTypes ? names[t] : "an unknown type";
}

bool is_64bit(int t) { return t == kInt64 || t == kUint64 || t == kFloat64; }

// The kind a group may aggregate: sends and receives are one.
OpKind family(OpKind k) { return k == OpKind::recv ? OpKind::send : k; }

// Holds the operations' communicators busy while it lives: CommDestroy drains them.
struct Working {
  explicit Working(std::vector<CommPtr> c) : comms(std::move(c)) {
    for (const CommPtr& comm : comms) comm->begin_work();
  }
  ~Working() {
    for (const CommPtr& comm : comms) comm->end_work();
  }
  Working(const Working&) = delete;
  Working& operator=(const Working&) = delete;
  std::vector<CommPtr> comms;
};

// What the work's copies share. Queued work pins its communicators until its last copy is gone
// (it ran, was skipped, or was never queued), so CommDestroy waits for it and never for work that
// will not run. A graph's recording pins nothing (NCCL's ncclCommDestroy does not wait for
// graphs that may launch again): each launch pins them while it runs.
struct Issued {
  explicit Issued(std::vector<CommPtr> c)
      : comms(std::move(c)), queued(std::make_unique<Working>(comms)) {}
  std::vector<CommPtr> comms;
  std::unique_ptr<Working> queued;
};

}  // namespace

Library::Library(Dialect dialect, std::unique_ptr<Runtime> runtime)
    : d_(dialect),
      runtime_(std::move(runtime)),
      rt_(*runtime_),
      in_progress_(std::string(dialect.name) + " operation in progress") {}

Library::Group& Library::group() {
  static thread_local Group g;
  return g;
}

int Library::fail(int code, const char* format, ...) {
  char buffer[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof buffer, format, args);
  va_end(args);
  t_last = buffer;
  return code;
}

int Library::enter(const char* fn) {
  std::call_once(identified_,
                 [this] { set_comm_identity({d_.prefix, d_.device_label, d_.timeout_env}); });
  if (int injected = rt_.enter(fn)) return fail(injected, "%s: injected fault", fn);
  return kSuccess;
}

Library::Handle* Library::lookup(void* comm) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = live_.find(comm);
  return it == live_.end() ? nullptr : it->second.get();
}

std::unique_ptr<Library::Handle> Library::take(void* comm) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = live_.find(comm);
  if (it == live_.end()) return nullptr;
  std::unique_ptr<Handle> h = std::move(it->second);
  live_.erase(it);
  devices_in_use_.erase({h->id, h->comm->device()});
  return h;
}

// ---- running: the operations' streams checked, their memory placed, the engine --------------

int Library::run(std::vector<Pending>& ops) {
  std::vector<Part> parts;
  std::vector<CommPtr> comms;
  for (const Pending& p : ops) {
    const int device = p.op.comm->device();
    const int stream_device = rt_.stream_device(p.stream);
    if (stream_device < 0) {
      return fail(kInvalidArgument, "%s: stream %p is not a live stream", p.fn, p.stream);
    }
    if (stream_device != device) {
      return fail(kInvalidArgument, "%s: the stream is on %s %d, the communicator (%s) on %s %d",
                  p.fn, d_.device, stream_device, p.op.comm->who().c_str(), d_.device, device);
    }
    parts.push_back({p.stream, p.ranges});
    comms.push_back(p.op.comm);
  }
  std::vector<Op> engine;
  for (const Pending& p : ops) engine.push_back(p.op);
  auto issued = std::make_shared<Issued>(std::move(comms));
  const Refusal r = rt_.run(parts, [engine, issued](const std::vector<std::vector<void*>>& host) {
    const Working running(issued->comms);
    std::vector<Op> placed = engine;
    for (size_t k = 0; k < placed.size(); ++k) {
      Op& o = placed[k];
      const Op& given = engine[k];
      size_t i = 0;
      if (o.send != nullptr && o.count > 0) o.send = host[k][i++];
      if (o.recv != nullptr && o.count > 0)
        o.recv = given.recv == given.send ? const_cast<void*>(o.send) : host[k][i++];
    }
    run_ops(placed);  // a failure becomes the communicator's asynchronous error
  });
  switch (r.kind) {
    case Refusal::none:
      if (r.recorded) issued->queued.reset();
      return kSuccess;
    case Refusal::unknown_stream:
      return fail(kInvalidArgument, "%s: stream %p is not a live stream", ops[r.part].fn,
                  parts[r.part].stream);
    case Refusal::several_streams:
      return fail(kInvalidUsage,
                  "%s: the emulator runs a group on one stream, and this operation is on another "
                  "(nothing of the group ran)",
                  ops[r.part].fn);
    case Refusal::capture_invalidated:
      return fail(kInvalidUsage, "%s: the stream's capture was invalidated (nothing was queued)",
                  ops[r.part].fn);
    case Refusal::bad_range:
      break;
  }
  const Pending& p = ops[r.part];
  return fail(kInvalidArgument,
              "%s: buffer [%p, +%zu) is not inside one live allocation of %s %d (%s)", p.fn,
              p.ranges[r.range].ptr, p.ranges[r.range].bytes, d_.device, p.op.comm->device(),
              p.op.comm->who().c_str());
}

int Library::submit(Pending p) {
  std::string message;
  if (tfl_status st = p.op.comm->error(&message); st != TFL_OK) {
    return fail(code_of(st), "%s: %s failed earlier: %s", p.fn, p.op.comm->who().c_str(),
                message.c_str());
  }
  if (group().depth > 0) {
    group().ops.push_back(std::move(p));
    return kSuccess;
  }
  std::vector<Pending> one;
  one.push_back(std::move(p));
  return run(one);
}

int Library::one(const char* fn, void* comm, void* stream, OpKind kind, const void* send,
                 void* recv, size_t count, int type, int op, int root, int peer, bool reduces) {
  if (int st = enter(fn)) return st;
  Handle* h = lookup(comm);
  if (h == nullptr)
    return fail(kInvalidArgument, "%s: comm %p is not a live communicator", fn, comm);
  const int dtype = engine_dtype(type);
  if (dtype < 0) {
    return fail(kInvalidArgument, "%s: the emulator does not move %s data", fn, type_name(type));
  }
  if (!d_.reduces_64bit && is_64bit(type) && kind != OpKind::broadcast &&
      kind != OpKind::all_gather) {
    return fail(kInvalidArgument, "%s: %s data: only %sBroadcast and %sAllGather take 64-bit types",
                fn, type_name(type), d_.prefix, d_.prefix);
  }
  static const int kOps[kNumOps] = {TFL_REDUCE_SUM, TFL_REDUCE_PROD, TFL_REDUCE_MAX, TFL_REDUCE_MIN,
                                    TFL_REDUCE_AVG};
  if (reduces) {
    if (op < 0 || op >= kNumOps) return fail(kInvalidArgument, "%s: unknown reduction %d", fn, op);
    if (!reduction_supported(dtype, kOps[op])) {
      return fail(kInvalidArgument, "%s: %s does not reduce %s data with %s", fn, d_.name,
                  type_name(type), reduce_op_name(kOps[op]));
    }
  }
  const int n = h->comm->nranks();
  if (root >= n || peer >= n || root < -1 || peer < -1) {
    return fail(kInvalidArgument, "%s: rank %d is outside the communicator's %d ranks", fn,
                root >= n || root < -1 ? root : peer, n);
  }
  const bool writes = kind == OpKind::recv || kind == OpKind::all_reduce ||
                      kind == OpKind::all_gather || kind == OpKind::reduce_scatter ||
                      kind == OpKind::broadcast;
  if (count > 0 && ((kind != OpKind::recv && send == nullptr) || (writes && recv == nullptr))) {
    return fail(kInvalidArgument, "%s: a buffer is NULL", fn);
  }
  Pending p;
  p.fn = fn;
  p.stream = stream;
  p.op.kind = kind;
  p.op.send = send;
  p.op.recv = recv;
  p.op.count = count;
  p.op.dtype = dtype;
  p.op.op = reduces ? kOps[op] : 0;
  p.op.root = root;
  p.op.peer = peer;
  p.op.comm = h->comm;
  const size_t elem = dtype_size(dtype);
  const size_t send_elems = kind == OpKind::reduce_scatter ? count * n : count;
  const size_t recv_elems = kind == OpKind::all_gather ? count * n : count;
  if (count > 0) {
    if (send != nullptr) p.ranges.push_back({send, send_elems * elem});
    if (recv != nullptr && recv != send) p.ranges.push_back({recv, recv_elems * elem});
  }
  return submit(std::move(p));
}

// ---- the API ---------------------------------------------------------------------------------

int Library::get_version(const char* fn, int* version) {
  if (int st = enter(fn)) return st;
  if (version == nullptr) return fail(kInvalidArgument, "%s: version is NULL", fn);
  *version = d_.version;
  return kSuccess;
}

int Library::get_unique_id(const char* fn, char* id) {
  if (int st = enter(fn)) return st;
  if (id == nullptr) return fail(kInvalidArgument, "%s: uniqueId is NULL", fn);
  tfl_comm_id made;
  make_unique_id(&made);
  static_assert(kUniqueIdBytes <= sizeof(made.bytes), "the id fits the engine's");
  std::memcpy(id, made.bytes, kUniqueIdBytes);
  return kSuccess;
}

int Library::comm_init_rank(const char* fn, void** comm, int nranks, const char* id, int rank) {
  if (int st = enter(fn)) return st;
  if (comm == nullptr) return fail(kInvalidArgument, "%s: comm is NULL", fn);
  const int device = rt_.current_device();
  if (device < 0) {
    return fail(kUnhandledRuntimeError, "%s: no current %s (%s)", fn, d_.device, d_.set_device);
  }
  if (nranks < 1 || nranks > kMaxRanks || rank < 0 || rank >= nranks) {
    return fail(kInvalidArgument, "%s: rank %d of %d (the emulator has at most %d)", fn, rank,
                nranks, kMaxRanks);
  }
  const std::string key(id, kUniqueIdBytes);
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!devices_in_use_.insert({key, device}).second) {
      return fail(kInvalidUsage,
                  "%s: %s %d already holds a rank of this communicator (one rank per device)", fn,
                  d_.device, device);
    }
  }
  auto release_device = [&] {
    std::lock_guard<std::mutex> lk(mu_);
    devices_in_use_.erase({key, device});
  };
  uint32_t timeout_ms = 0;
  std::string why;
  if (!default_timeout_ms(&timeout_ms, &why)) {
    release_device();
    return fail(kInvalidArgument, "%s: %s", fn, why.c_str());
  }
  tfl_comm_id engine_id;
  std::memset(engine_id.bytes, 0, sizeof engine_id.bytes);
  std::memcpy(engine_id.bytes, id, kUniqueIdBytes);
  try {
    auto h = std::make_unique<Handle>();
    h->comm = std::make_shared<Comm>(nranks, engine_id, rank, device, timeout_ms);
    h->id = key;
    void* handle = h.get();
    std::lock_guard<std::mutex> lk(mu_);
    live_.emplace(handle, std::move(h));
    *comm = handle;
    return kSuccess;
  } catch (const CommError& e) {
    release_device();
    return fail(code_of(e.status()), "%s: %s", fn, e.what());
  }
}

int Library::comm_abort(const char* fn, void* comm) {
  if (int st = enter(fn)) return st;
  std::unique_ptr<Handle> h = take(comm);
  if (!h) return fail(kInvalidArgument, "%s: comm %p is not a live communicator", fn, comm);
  h->comm->destroyed.store(true);
  h->comm->abort();  // ends this rank's waits and its peers'
  return kSuccess;
}

int Library::comm_destroy(const char* fn, void* comm) {
  if (int st = enter(fn)) return st;
  std::unique_ptr<Handle> h = take(comm);
  if (!h) return fail(kInvalidArgument, "%s: comm %p is not a live communicator", fn, comm);
  h->comm->drain();  // operations of other threads end first (each within the timeout)
  h->comm->destroyed.store(true);
  return kSuccess;
}

int Library::comm_get_async_error(const char* fn, void* comm, int* error) {
  if (int st = enter(fn)) return st;
  Handle* h = lookup(comm);
  if (h == nullptr || error == nullptr) return fail(kInvalidArgument, "%s: bad argument", fn);
  std::string message;
  const tfl_status st = h->comm->error(&message);
  *error = code_of(st);
  if (st != TFL_OK) t_last = message;
  return kSuccess;
}

const char* Library::error_string(int result) const {
  switch (result) {
    case kSuccess:
      return "no error";
    case kUnhandledRuntimeError:
      return d_.runtime_error;
    case kSystemError:
      return "unhandled system error";
    case kInternalError:
      return "internal error";
    case kInvalidArgument:
      return "invalid argument";
    case kInvalidUsage:
      return "invalid usage";
    case kRemoteError:
      return "remote process exited or there was a network error";
    case kInProgress:
      return in_progress_.c_str();
    default:
      return "unknown result code";
  }
}

const char* Library::last_error(void* comm) {
  if (comm != nullptr) {
    if (Handle* h = lookup(comm)) {
      std::string message;
      if (h->comm->error(&message) != TFL_OK) t_last = message;
    }
  }
  return t_last.c_str();
}

int Library::comm_count(const char* fn, void* comm, int* count) {
  if (int st = enter(fn)) return st;
  Handle* h = lookup(comm);
  if (h == nullptr || count == nullptr) return fail(kInvalidArgument, "%s: bad argument", fn);
  *count = h->comm->nranks();
  return kSuccess;
}

int Library::comm_device(const char* fn, void* comm, int* device) {
  if (int st = enter(fn)) return st;
  Handle* h = lookup(comm);
  if (h == nullptr || device == nullptr) return fail(kInvalidArgument, "%s: bad argument", fn);
  *device = h->comm->device();
  return kSuccess;
}

int Library::comm_user_rank(const char* fn, void* comm, int* rank) {
  if (int st = enter(fn)) return st;
  Handle* h = lookup(comm);
  if (h == nullptr || rank == nullptr) return fail(kInvalidArgument, "%s: bad argument", fn);
  *rank = h->comm->rank();
  return kSuccess;
}

int Library::broadcast(const char* fn, const void* send, void* recv, size_t count, int type,
                       int root, void* comm, void* stream) {
  return one(fn, comm, stream, OpKind::broadcast, send, recv, count, type, 0, root, -1, false);
}

int Library::reduce(const char* fn, const void* send, void* recv, size_t count, int type, int op,
                    int root, void* comm, void* stream) {
  return one(fn, comm, stream, OpKind::reduce, send, recv, count, type, op, root, -1, true);
}

int Library::all_reduce(const char* fn, const void* send, void* recv, size_t count, int type,
                        int op, void* comm, void* stream) {
  return one(fn, comm, stream, OpKind::all_reduce, send, recv, count, type, op, -1, -1, true);
}

int Library::reduce_scatter(const char* fn, const void* send, void* recv, size_t recv_count,
                            int type, int op, void* comm, void* stream) {
  return one(fn, comm, stream, OpKind::reduce_scatter, send, recv, recv_count, type, op, -1, -1,
             true);
}

int Library::all_gather(const char* fn, const void* send, void* recv, size_t send_count, int type,
                        void* comm, void* stream) {
  return one(fn, comm, stream, OpKind::all_gather, send, recv, send_count, type, 0, -1, -1, false);
}

int Library::send(const char* fn, const void* buf, size_t count, int type, int peer, void* comm,
                  void* stream) {
  return one(fn, comm, stream, OpKind::send, buf, nullptr, count, type, 0, -1, peer, false);
}

int Library::recv(const char* fn, void* buf, size_t count, int type, int peer, void* comm,
                  void* stream) {
  return one(fn, comm, stream, OpKind::recv, nullptr, buf, count, type, 0, -1, peer, false);
}

int Library::group_start(const char* fn) {
  if (int st = enter(fn)) return st;
  ++group().depth;
  return kSuccess;
}

int Library::group_end(const char* fn) {
  if (int st = enter(fn)) return st;
  Group& g = group();
  if (g.depth == 0) return fail(kInvalidUsage, "%s: no %sGroupStart", fn, d_.prefix);
  if (--g.depth > 0) return kSuccess;
  std::vector<Pending> ops;
  ops.swap(g.ops);
  for (const Pending& p : ops) {
    if (!d_.mixed_groups && family(p.op.kind) != family(ops.front().op.kind)) {
      return fail(kInvalidUsage,
                  "%s: a group aggregates one kind of operation; this one holds %s and %s "
                  "(nothing of it ran)",
                  fn, ops.front().fn, p.fn);
    }
  }
  return ops.empty() ? kSuccess : run(ops);
}

}  // namespace emu_kit::nccl
