// libeccl.so of the TopsRider emulator: ECCL's communicators and operations over the emulator
// kit's shared-memory communicator engine (emu_kit/comm*.h, the one sim's and the CANN
// emulator's collectives run on). Ranks are processes (or threads, one card each) of one machine.
//
// As all of this emulator's SDK work, an operation runs at submission, in stream order
// (topsEmuInternalPin resolves its buffers on the stream's card and keeps them backed), outside
// the runtime's lock: it returns once every rank reached it. Like the SDK's other producers it
// does not wait for a second producer's (Triton) work queued on the stream before it.
//
// The contract it enforces, as ECCL documents it: a communicator is made on the current card, one
// rank of a communicator per card, and takes only that card's streams and memory; every rank
// issues the same operations with the same count and type (else every rank's communicator
// fails, naming the rank that differs); only ecclBroadcast and ecclAllGather take 64-bit types;
// a group aggregates one kind of operation (sends and receives are one kind); a peer that never
// arrives fails the communicator within the timeout (TOPS_EMU_ECCL_TIMEOUT seconds, an emulator
// setting, else 60); a failure of an operation is the communicator's asynchronous error
// (ecclCommGetAsyncError) and fails every later operation at once; ecclCommAbort ends the waits
// of the communicator and its peers.
#include "eccl/eccl.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "emu_internal.h"
#include "emu_kit/comm.h"
#include "emu_kit/comm_ops.h"
#include "emu_kit/comm_reduce.h"

#define ECCL_API extern "C" __attribute__((visibility("default")))

struct ecclComm {
  emu_kit::CommPtr comm;
  std::string id;  // the unique id's bytes: one rank per card of it in this process
};

namespace {

std::mutex g_mu;
std::unordered_map<ecclComm_t, std::unique_ptr<ecclComm>>& live() {
  static auto* m = new std::unordered_map<ecclComm_t, std::unique_ptr<ecclComm>>();
  return *m;
}
std::set<std::pair<std::string, int>>& cards_in_use() {
  static auto* s = new std::set<std::pair<std::string, int>>();
  return *s;
}

thread_local std::string t_last;  // ecclGetLastError(NULL)

void identify() {
  static std::once_flag once;
  std::call_once(
      once, [] { emu_kit::set_comm_identity({"eccl", "emulated GCU", "TOPS_EMU_ECCL_TIMEOUT"}); });
}

ecclResult_t fail(ecclResult_t code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
ecclResult_t fail(ecclResult_t code, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  t_last = buf;
  return code;
}

ecclResult_t code_of(tfl_status st) {
  switch (st) {
    case TFL_OK:
      return ecclSuccess;
    case TFL_ERROR_TIMEOUT:
    case TFL_ERROR_ABORTED:
      return ecclRemoteError;
    case TFL_ERROR_INVALID_VALUE:
      return ecclInvalidArgument;
    case TFL_ERROR_NOT_SUPPORTED:
      return ecclInvalidUsage;
    default:
      return ecclInternalError;
  }
}

#define ECCL_ENTER(name)                                                             \
  do {                                                                               \
    identify();                                                                      \
    if (int injected_ = topsEmuInternalEnter(name))                                  \
      return fail(static_cast<ecclResult_t>(injected_), "%s: injected fault", name); \
  } while (0)

ecclComm* lookup(ecclComm_t comm) {
  std::lock_guard<std::mutex> lk(g_mu);
  auto it = live().find(comm);
  return it == live().end() ? nullptr : it->second.get();
}

// The engine's element type; -1 for those the emulator does not move (uint32, uint64).
int engine_dtype(int t) {
  switch (t) {
    case ecclInt8:
      return TFL_DTYPE_I8;
    case ecclUint8:
      return TFL_DTYPE_U8;
    case ecclInt32:
      return TFL_DTYPE_I32;
    case ecclInt64:
      return TFL_DTYPE_I64;
    case ecclFloat16:
      return TFL_DTYPE_F16;
    case ecclFloat32:
      return TFL_DTYPE_F32;
    case ecclFloat64:
      return TFL_DTYPE_F64;
    case ecclBfloat16:
      return TFL_DTYPE_BF16;
    default:
      return -1;
  }
}

const char* type_name(int t) {
  static const char* names[] = {"int8",   "uint8",   "int32",   "uint32",  "int64",
                                "uint64", "float16", "float32", "float64", "bfloat16"};
  return t >= 0 && t < ecclNumTypes ? names[t] : "an unknown type";
}

bool is_64bit(int t) { return t == ecclInt64 || t == ecclUint64 || t == ecclFloat64; }

// The kind a group may aggregate: sends and receives are one.
emu_kit::OpKind family(emu_kit::OpKind k) {
  return k == emu_kit::OpKind::recv ? emu_kit::OpKind::send : k;
}

// One validated operation with its stream and the device memory it names.
struct Pending {
  emu_kit::Op op;
  topsStream_t stream;
  std::vector<topsEmuRange> ranges;
  const char* fn;
};

struct Group {
  int depth = 0;
  std::vector<Pending> ops;
};
thread_local Group t_group;

// Runs `ops` now, in this thread: buffers pinned and made host addresses, then the engine.
ecclResult_t run(std::vector<Pending>& ops) {
  std::vector<void*> pins;
  std::vector<emu_kit::Op> engine;
  auto unpin = [&] {
    for (void* p : pins) topsEmuInternalUnpin(p);
  };
  for (Pending& p : ops) {
    const int device = p.op.comm->device();
    const int stream_card = topsEmuInternalStreamDevice(p.stream);
    if (stream_card < 0) {
      unpin();
      return fail(ecclInvalidArgument, "%s: stream %p is not a live stream", p.fn,
                  static_cast<void*>(p.stream));
    }
    if (stream_card != device) {
      unpin();
      return fail(ecclInvalidArgument,
                  "%s: the stream is on GCU %d, the communicator (%s) on GCU %d", p.fn, stream_card,
                  p.op.comm->who().c_str(), device);
    }
    std::vector<void*> host(p.ranges.size(), nullptr);
    int card = -1;
    void* pin = nullptr;
    size_t bad = 0;
    const topsError_t e = topsEmuInternalPin(p.stream, p.ranges.data(), p.ranges.size(),
                                             host.data(), &card, &pin, &bad);
    if (e != topsSuccess) {
      unpin();
      if (e == topsErrorInvalidHandle) {
        return fail(ecclInvalidArgument, "%s: stream %p is not a live stream", p.fn,
                    static_cast<void*>(p.stream));
      }
      return fail(ecclInvalidArgument,
                  "%s: buffer [%p, +%zu) is not inside one live allocation of GCU %d (%s)", p.fn,
                  p.ranges[bad].ptr, p.ranges[bad].bytes, device, p.op.comm->who().c_str());
    }
    pins.push_back(pin);
    emu_kit::Op o = p.op;
    size_t i = 0;
    if (o.send != nullptr && o.count > 0) o.send = host[i++];
    if (o.recv != nullptr && o.count > 0)
      o.recv = p.op.recv == p.op.send ? const_cast<void*>(o.send) : host[i++];
    engine.push_back(std::move(o));
  }
  for (const emu_kit::Op& o : engine) o.comm->begin_work();
  emu_kit::run_ops(engine);  // a failure becomes the communicator's asynchronous error
  for (const emu_kit::Op& o : engine) o.comm->end_work();
  unpin();
  return ecclSuccess;
}

ecclResult_t submit(Pending p) {
  std::string message;
  if (tfl_status st = p.op.comm->error(&message); st != TFL_OK) {
    return fail(code_of(st), "%s: %s failed earlier: %s", p.fn, p.op.comm->who().c_str(),
                message.c_str());
  }
  if (t_group.depth > 0) {
    t_group.ops.push_back(std::move(p));
    return ecclSuccess;
  }
  std::vector<Pending> one;
  one.push_back(std::move(p));
  return run(one);
}

ecclResult_t one(const char* fn, ecclComm_t comm, topsStream_t stream, emu_kit::OpKind kind,
                 const void* send, void* recv, size_t count, int type, int op, int root, int peer,
                 bool reduces) {
  ecclComm* h = lookup(comm);
  if (h == nullptr) {
    return fail(ecclInvalidArgument, "%s: comm %p is not a live communicator", fn,
                static_cast<void*>(comm));
  }
  const int dtype = engine_dtype(type);
  if (dtype < 0) {
    return fail(ecclInvalidArgument, "%s: the emulator does not move %s data", fn, type_name(type));
  }
  if (is_64bit(type) && kind != emu_kit::OpKind::broadcast && kind != emu_kit::OpKind::all_gather) {
    return fail(ecclInvalidArgument,
                "%s: %s data: only ecclBroadcast and ecclAllGather take 64-bit types", fn,
                type_name(type));
  }
  static const int kOps[] = {TFL_REDUCE_SUM, TFL_REDUCE_PROD, TFL_REDUCE_MAX, TFL_REDUCE_MIN,
                             TFL_REDUCE_AVG};
  if (reduces) {
    if (op < 0 || op >= ecclNumOps)
      return fail(ecclInvalidArgument, "%s: unknown reduction %d", fn, op);
    if (!emu_kit::reduction_supported(dtype, kOps[op])) {
      return fail(ecclInvalidArgument, "%s: ECCL does not reduce %s data with %s", fn,
                  type_name(type), emu_kit::reduce_op_name(kOps[op]));
    }
  }
  const int n = h->comm->nranks();
  if ((root >= 0 && root >= n) || (peer >= 0 && peer >= n) || (root < -1) || (peer < -1)) {
    return fail(ecclInvalidArgument, "%s: rank %d is outside the communicator's %d ranks", fn,
                root >= n || root < -1 ? root : peer, n);
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
  const size_t elem = emu_kit::dtype_size(dtype);
  size_t send_elems = count;
  size_t recv_elems = count;
  if (kind == emu_kit::OpKind::all_gather) recv_elems = count * n;
  if (kind == emu_kit::OpKind::reduce_scatter) send_elems = count * n;
  if (count > 0) {
    if (send != nullptr) p.ranges.push_back({send, send_elems * elem});
    if (recv != nullptr && recv != send) p.ranges.push_back({recv, recv_elems * elem});
  }
  if (count > 0 &&
      ((kind != emu_kit::OpKind::recv && send == nullptr) ||
       (recv == nullptr &&
        (kind == emu_kit::OpKind::recv || kind == emu_kit::OpKind::all_reduce ||
         kind == emu_kit::OpKind::all_gather || kind == emu_kit::OpKind::reduce_scatter ||
         kind == emu_kit::OpKind::broadcast)))) {
    return fail(ecclInvalidArgument, "%s: a buffer is NULL", fn);
  }
  return submit(std::move(p));
}

}  // namespace

ECCL_API ecclResult_t ecclGetVersion(int* version) {
  ECCL_ENTER("ecclGetVersion");
  if (version == nullptr) return fail(ecclInvalidArgument, "ecclGetVersion: version is NULL");
  *version = ECCL_VERSION_CODE;
  return ecclSuccess;
}

ECCL_API ecclResult_t ecclGetUniqueId(ecclUniqueId* uniqueId) {
  ECCL_ENTER("ecclGetUniqueId");
  if (uniqueId == nullptr) return fail(ecclInvalidArgument, "ecclGetUniqueId: uniqueId is NULL");
  tfl_comm_id id;
  emu_kit::make_unique_id(&id);
  static_assert(sizeof(uniqueId->internal) <= sizeof(id.bytes), "the id fits the engine's");
  std::memcpy(uniqueId->internal, id.bytes, sizeof(uniqueId->internal));
  return ecclSuccess;
}

ECCL_API ecclResult_t ecclCommInitRank(ecclComm_t* comm, int nranks, ecclUniqueId commId,
                                       int rank) {
  ECCL_ENTER("ecclCommInitRank");
  if (comm == nullptr) return fail(ecclInvalidArgument, "ecclCommInitRank: comm is NULL");
  int device = -1;
  if (topsGetDevice(&device) != topsSuccess || device < 0) {
    return fail(ecclUnhandledTopsError, "ecclCommInitRank: no current GCU (topsSetDevice)");
  }
  if (nranks < 1 || nranks > emu_kit::kMaxRanks || rank < 0 || rank >= nranks) {
    return fail(ecclInvalidArgument,
                "ecclCommInitRank: rank %d of %d (the emulator has at most %d)", rank, nranks,
                emu_kit::kMaxRanks);
  }
  const std::string key(commId.internal, sizeof(commId.internal));
  {
    std::lock_guard<std::mutex> lk(g_mu);
    if (!cards_in_use().insert({key, device}).second) {
      return fail(ecclInvalidUsage,
                  "ecclCommInitRank: GCU %d already holds a rank of this communicator (one rank "
                  "per card)",
                  device);
    }
  }
  uint32_t timeout_ms = 0;
  std::string why;
  tfl_comm_id id;
  std::memset(id.bytes, 0, sizeof id.bytes);
  std::memcpy(id.bytes, commId.internal, sizeof(commId.internal));
  auto release_card = [&] {
    std::lock_guard<std::mutex> lk(g_mu);
    cards_in_use().erase({key, device});
  };
  if (!emu_kit::default_timeout_ms(&timeout_ms, &why)) {
    release_card();
    return fail(ecclInvalidArgument, "ecclCommInitRank: %s", why.c_str());
  }
  try {
    auto h = std::make_unique<ecclComm>();
    h->comm = std::make_shared<emu_kit::Comm>(nranks, id, rank, device, timeout_ms);
    h->id = key;
    ecclComm_t handle = h.get();
    std::lock_guard<std::mutex> lk(g_mu);
    live().emplace(handle, std::move(h));
    *comm = handle;
    return ecclSuccess;
  } catch (const emu_kit::CommError& e) {
    release_card();
    return fail(code_of(e.status()), "ecclCommInitRank: %s", e.what());
  }
}

namespace {
// Takes the communicator out of the live table (nullptr: not live).
std::unique_ptr<ecclComm> take(ecclComm_t comm) {
  std::lock_guard<std::mutex> lk(g_mu);
  auto it = live().find(comm);
  if (it == live().end()) return nullptr;
  std::unique_ptr<ecclComm> h = std::move(it->second);
  live().erase(it);
  cards_in_use().erase({h->id, h->comm->device()});
  return h;
}
}  // namespace

ECCL_API ecclResult_t ecclCommAbort(ecclComm_t comm) {
  ECCL_ENTER("ecclCommAbort");
  std::unique_ptr<ecclComm> h = take(comm);
  if (!h) {
    return fail(ecclInvalidArgument, "ecclCommAbort: comm %p is not a live communicator",
                static_cast<void*>(comm));
  }
  h->comm->destroyed.store(true);
  h->comm->abort();  // ends this rank's waits and its peers'
  return ecclSuccess;
}

ECCL_API ecclResult_t ecclCommDestroy(ecclComm_t comm) {
  ECCL_ENTER("ecclCommDestroy");
  std::unique_ptr<ecclComm> h = take(comm);
  if (!h) {
    return fail(ecclInvalidArgument, "ecclCommDestroy: comm %p is not a live communicator",
                static_cast<void*>(comm));
  }
  h->comm->drain();  // operations of other threads end first (each within the timeout)
  h->comm->destroyed.store(true);
  return ecclSuccess;
}

ECCL_API ecclResult_t ecclCommGetAsyncError(ecclComm_t comm, ecclResult_t* asyncError) {
  ECCL_ENTER("ecclCommGetAsyncError");
  ecclComm* h = lookup(comm);
  if (h == nullptr || asyncError == nullptr) {
    return fail(ecclInvalidArgument, "ecclCommGetAsyncError: bad argument");
  }
  std::string message;
  const tfl_status st = h->comm->error(&message);
  *asyncError = code_of(st);
  if (st != TFL_OK) t_last = message;
  return ecclSuccess;
}

ECCL_API const char* ecclGetErrorString(ecclResult_t result) {
  switch (result) {
    case ecclSuccess:
      return "no error";
    case ecclUnhandledTopsError:
      return "unhandled tops error";
    case ecclSystemError:
      return "unhandled system error";
    case ecclInternalError:
      return "internal error";
    case ecclInvalidArgument:
      return "invalid argument";
    case ecclInvalidUsage:
      return "invalid usage";
    case ecclRemoteError:
      return "remote process exited or there was a network error";
    case ecclInProgress:
      return "ECCL operation in progress";
    default:
      return "unknown result code";
  }
}

ECCL_API const char* ecclGetLastError(ecclComm_t comm) {
  if (comm != nullptr) {
    if (ecclComm* h = lookup(comm)) {
      std::string message;
      if (h->comm->error(&message) != TFL_OK) t_last = message;
    }
  }
  return t_last.c_str();
}

ECCL_API ecclResult_t ecclCommCount(const ecclComm_t comm, int* count) {
  ECCL_ENTER("ecclCommCount");
  ecclComm* h = lookup(comm);
  if (h == nullptr || count == nullptr)
    return fail(ecclInvalidArgument, "ecclCommCount: bad argument");
  *count = h->comm->nranks();
  return ecclSuccess;
}

ECCL_API ecclResult_t ecclCommDevice(const ecclComm_t comm, int* device) {
  ECCL_ENTER("ecclCommDevice");
  ecclComm* h = lookup(comm);
  if (h == nullptr || device == nullptr) {
    return fail(ecclInvalidArgument, "ecclCommDevice: bad argument");
  }
  *device = h->comm->device();
  return ecclSuccess;
}

ECCL_API ecclResult_t ecclCommUserRank(const ecclComm_t comm, int* rank) {
  ECCL_ENTER("ecclCommUserRank");
  ecclComm* h = lookup(comm);
  if (h == nullptr || rank == nullptr)
    return fail(ecclInvalidArgument, "ecclCommUserRank: bad argument");
  *rank = h->comm->rank();
  return ecclSuccess;
}

ECCL_API ecclResult_t ecclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                    ecclDataType_t datatype, int root, ecclComm_t comm,
                                    topsStream_t stream) {
  ECCL_ENTER("ecclBroadcast");
  return one("ecclBroadcast", comm, stream, emu_kit::OpKind::broadcast, sendbuff, recvbuff, count,
             datatype, 0, root, -1, false);
}

ECCL_API ecclResult_t ecclReduce(const void* sendbuff, void* recvbuff, size_t count,
                                 ecclDataType_t datatype, ecclRedOp_t op, int root, ecclComm_t comm,
                                 topsStream_t stream) {
  ECCL_ENTER("ecclReduce");
  return one("ecclReduce", comm, stream, emu_kit::OpKind::reduce, sendbuff, recvbuff, count,
             datatype, op, root, -1, true);
}

ECCL_API ecclResult_t ecclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                    ecclDataType_t datatype, ecclRedOp_t op, ecclComm_t comm,
                                    topsStream_t stream) {
  ECCL_ENTER("ecclAllReduce");
  return one("ecclAllReduce", comm, stream, emu_kit::OpKind::all_reduce, sendbuff, recvbuff, count,
             datatype, op, -1, -1, true);
}

ECCL_API ecclResult_t ecclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                        ecclDataType_t datatype, ecclRedOp_t op, ecclComm_t comm,
                                        topsStream_t stream) {
  ECCL_ENTER("ecclReduceScatter");
  return one("ecclReduceScatter", comm, stream, emu_kit::OpKind::reduce_scatter, sendbuff, recvbuff,
             recvcount, datatype, op, -1, -1, true);
}

ECCL_API ecclResult_t ecclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                    ecclDataType_t datatype, ecclComm_t comm, topsStream_t stream) {
  ECCL_ENTER("ecclAllGather");
  return one("ecclAllGather", comm, stream, emu_kit::OpKind::all_gather, sendbuff, recvbuff,
             sendcount, datatype, 0, -1, -1, false);
}

ECCL_API ecclResult_t ecclSend(const void* sendbuff, size_t count, ecclDataType_t datatype,
                               int peer, ecclComm_t comm, topsStream_t stream) {
  ECCL_ENTER("ecclSend");
  return one("ecclSend", comm, stream, emu_kit::OpKind::send, sendbuff, nullptr, count, datatype, 0,
             -1, peer, false);
}

ECCL_API ecclResult_t ecclRecv(void* recvbuff, size_t count, ecclDataType_t datatype, int peer,
                               ecclComm_t comm, topsStream_t stream) {
  ECCL_ENTER("ecclRecv");
  return one("ecclRecv", comm, stream, emu_kit::OpKind::recv, nullptr, recvbuff, count, datatype, 0,
             -1, peer, false);
}

ECCL_API ecclResult_t ecclGroupStart(void) {
  ECCL_ENTER("ecclGroupStart");
  ++t_group.depth;
  return ecclSuccess;
}

ECCL_API ecclResult_t ecclGroupEnd(void) {
  ECCL_ENTER("ecclGroupEnd");
  if (t_group.depth == 0) return fail(ecclInvalidUsage, "ecclGroupEnd: no ecclGroupStart");
  if (--t_group.depth > 0) return ecclSuccess;
  std::vector<Pending> ops;
  ops.swap(t_group.ops);
  for (const Pending& p : ops) {
    if (family(p.op.kind) != family(ops.front().op.kind)) {
      return fail(ecclInvalidUsage,
                  "ecclGroupEnd: a group aggregates one kind of operation; this one holds %s "
                  "and %s (nothing of it ran)",
                  ops.front().fn, p.fn);
    }
  }
  return ops.empty() ? ecclSuccess : run(ops);
}
