// libhccl.so of the CANN emulator: HCCL's root-info communicators and operations over the emulator
// kit's shared-memory communicator engine (emu_kit/comm*.h, the one sim's collectives run on),
// queued on emulated aclrtStreams (aclEmuInternalEnqueue) so they are stream-ordered and really
// complete later. Ranks are processes (or threads, one device each) of one machine.
//
// The contract it enforces, as CANN documents it: a communicator is made on the current device
// and takes only that device's streams and memory; every rank issues the same operations with the
// same count and type (else every rank's communicator fails, naming the rank that differs); the
// types each operation takes; a peer that never arrives is HCCL_E_TIMEOUT within the timeout
// (HCCL_EXEC_TIMEOUT seconds, else 60); a failure of queued work is the communicator's
// asynchronous error (HcclGetCommAsyncError) and fails every later operation at once. HCCL has no
// abort call: HcclCommDestroy while operations are queued breaks them (their peers' waits end too).
#include <hccl/hccl.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "emu_internal.h"
#include "emu_kit/comm.h"
#include "emu_kit/comm_ops.h"
#include "emu_kit/comm_reduce.h"

namespace {

struct Handle {
  emu_kit::CommPtr comm;
};

std::mutex g_mu;
std::unordered_map<HcclComm, std::unique_ptr<Handle>>& handles() {
  static auto* live = new std::unordered_map<HcclComm, std::unique_ptr<Handle>>();
  return *live;
}

// The engine's names for this SDK, once, before any communicator.
void identify() {
  static std::once_flag once;
  std::call_once(once,
                 [] { emu_kit::set_comm_identity({"hccl", "emulated NPU", "HCCL_EXEC_TIMEOUT"}); });
}

HcclResult fail(HcclResult code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
HcclResult fail(HcclResult code, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  aclEmuInternalSetErrMsg(buf);  // what aclGetRecentErrMsg reports, as CANN's logs do
  return code;
}

HcclResult code_of(tfl_status st) {
  switch (st) {
    case TFL_OK:
      return HCCL_SUCCESS;
    case TFL_ERROR_TIMEOUT:
      return HCCL_E_TIMEOUT;
    case TFL_ERROR_ABORTED:
      return HCCL_E_REMOTE;
    case TFL_ERROR_INVALID_VALUE:
      return HCCL_E_PARA;
    case TFL_ERROR_NOT_SUPPORTED:
      return HCCL_E_NOT_SUPPORT;
    case TFL_ERROR_OUT_OF_MEMORY:
      return HCCL_E_MEMORY;
    default:
      return HCCL_E_INTERNAL;
  }
}

#define HCCL_ENTER(name)                                                           \
  do {                                                                             \
    identify();                                                                    \
    if (int injected_ = aclEmuInternalEnter(name))                                 \
      return fail(static_cast<HcclResult>(injected_), "%s: injected fault", name); \
    if (!aclEmuInternalInitialized())                                              \
      return fail(HCCL_E_RUNTIME, "%s: called before aclInit", name);              \
  } while (0)

Handle* lookup(HcclComm comm) {
  std::lock_guard<std::mutex> lk(g_mu);
  auto it = handles().find(comm);
  return it == handles().end() ? nullptr : it->second.get();
}

// The engine's element type for an HCCL type; -1 for those the emulator does not move.
int engine_dtype(HcclDataType t) {
  switch (t) {
    case HCCL_DATA_TYPE_INT8:
      return TFL_DTYPE_I8;
    case HCCL_DATA_TYPE_UINT8:
      return TFL_DTYPE_U8;
    case HCCL_DATA_TYPE_INT32:
      return TFL_DTYPE_I32;
    case HCCL_DATA_TYPE_INT64:
      return TFL_DTYPE_I64;
    case HCCL_DATA_TYPE_FP16:
      return TFL_DTYPE_F16;
    case HCCL_DATA_TYPE_FP32:
      return TFL_DTYPE_F32;
    case HCCL_DATA_TYPE_FP64:
      return TFL_DTYPE_F64;
    case HCCL_DATA_TYPE_BFP16:
      return TFL_DTYPE_BF16;
    default:
      return -1;
  }
}

const char* type_name(HcclDataType t) {
  static const char* names[] = {"int8",   "int16", "int32",  "fp16",   "fp32", "int64",
                                "uint64", "uint8", "uint16", "uint32", "fp64", "bfp16"};
  return t >= 0 && t < HCCL_DATA_TYPE_RESERVED ? names[t] : "an unknown type";
}

// The reductions' documented types: int8, int16, int32, int64, fp16, fp32, bfp16 (uint8 as well
// for MAX/MIN); no fp64, no AVG.
bool reduce_type_ok(HcclDataType t, HcclReduceOp op) {
  switch (t) {
    case HCCL_DATA_TYPE_INT8:
    case HCCL_DATA_TYPE_INT32:
    case HCCL_DATA_TYPE_INT64:
    case HCCL_DATA_TYPE_FP16:
    case HCCL_DATA_TYPE_FP32:
    case HCCL_DATA_TYPE_BFP16:
      return true;
    case HCCL_DATA_TYPE_UINT8:
      return op == HCCL_REDUCE_MAX || op == HCCL_REDUCE_MIN;
    default:
      return false;
  }
}

struct Work {
  std::vector<emu_kit::Op> ops;
};

aclError run_work(void* arg, char*, size_t) {
  emu_kit::run_ops(static_cast<Work*>(arg)->ops);  // a failure becomes the comm's async error
  return ACL_SUCCESS;
}

// After the work ran or was skipped (or was refused by the stream): exactly once.
void drop_work(void* arg) {
  auto* work = static_cast<Work*>(arg);
  for (const emu_kit::Op& o : work->ops) o.comm->end_work();
  delete work;
}

// Checks the stream and buffers of one call and queues its operations on the stream.
HcclResult submit(const char* fn, Handle* h, aclrtStream stream, std::vector<emu_kit::Op> ops,
                  const std::vector<aclEmuRange>& ranges) {
  const int device = h->comm->device();
  const int32_t stream_device = aclEmuInternalStreamDevice(stream);
  if (stream_device < 0) return fail(HCCL_E_PARA, "%s: stream %p is not a live stream", fn, stream);
  if (stream_device != device) {
    return fail(HCCL_E_PARA, "%s: the stream is on device %d, the communicator (%s) on device %d",
                fn, stream_device, h->comm->who().c_str(), device);
  }
  for (const aclEmuRange& r : ranges) {
    if (r.ptr == nullptr) return fail(HCCL_E_PTR, "%s: a buffer is NULL", fn);
    if (aclEmuInternalResolve(device, r.ptr, r.bytes) == nullptr) {
      return fail(HCCL_E_PTR,
                  "%s: buffer [%p, +%zu) is not inside one live allocation of device %d (%s); "
                  "it belongs to device %d",
                  fn, r.ptr, r.bytes, device, h->comm->who().c_str(),
                  aclEmuInternalPointerDevice(r.ptr, r.bytes));
    }
  }
  std::string message;
  if (tfl_status st = h->comm->error(&message); st != TFL_OK) {
    return fail(code_of(st), "%s: %s failed earlier: %s", fn, h->comm->who().c_str(),
                message.c_str());
  }
  auto* work = new Work{std::move(ops)};
  for (const emu_kit::Op& o : work->ops) o.comm->begin_work();
  const aclError e =
      aclEmuInternalEnqueue(stream, fn, run_work, work, drop_work, ranges.data(), ranges.size());
  return e == ACL_SUCCESS ? HCCL_SUCCESS : fail(HCCL_E_RUNTIME, "%s: the stream refused it", fn);
}

HcclResult one(const char* fn, HcclComm comm, aclrtStream stream, emu_kit::OpKind kind,
               const void* send, void* recv, uint64_t count, HcclDataType type, int op, int root,
               int peer, bool reduces) {
  Handle* h = lookup(comm);
  if (h == nullptr) return fail(HCCL_E_PARA, "%s: comm %p is not a live communicator", fn, comm);
  const int dtype = engine_dtype(type);
  if (dtype < 0) {
    return fail(HCCL_E_NOT_SUPPORT, "%s: the emulator does not move %s data", fn, type_name(type));
  }
  if (reduces) {
    if (op < 0 || op >= HCCL_REDUCE_RESERVED) {
      return fail(HCCL_E_PARA, "%s: unknown reduction %d", fn, op);
    }
    if (!reduce_type_ok(type, static_cast<HcclReduceOp>(op))) {
      return fail(HCCL_E_NOT_SUPPORT, "%s: HCCL does not reduce %s data with op %d", fn,
                  type_name(type), op);
    }
  }
  static const int kOps[] = {TFL_REDUCE_SUM, TFL_REDUCE_PROD, TFL_REDUCE_MAX, TFL_REDUCE_MIN};
  const int n = h->comm->nranks();
  const size_t elem = emu_kit::dtype_size(dtype);
  emu_kit::Op o;
  o.kind = kind;
  o.send = send;
  o.recv = recv;
  o.count = count;
  o.dtype = dtype;
  o.op = reduces ? kOps[op] : 0;
  o.root = root;
  o.peer = peer;
  o.comm = h->comm;
  if ((root >= 0 && root >= n) || (peer >= 0 && peer >= n)) {
    return fail(HCCL_E_PARA, "%s: rank %d is outside the communicator's %d ranks", fn,
                root >= n ? root : peer, n);
  }
  std::vector<aclEmuRange> ranges;
  size_t send_elems = count;
  size_t recv_elems = count;
  switch (kind) {
    case emu_kit::OpKind::all_gather:
      recv_elems = count * n;
      break;
    case emu_kit::OpKind::reduce_scatter:
      send_elems = count * n;
      break;
    case emu_kit::OpKind::all_to_all:
      send_elems = recv_elems = count * n;
      break;
    default:
      break;
  }
  if (send != nullptr && count > 0) ranges.push_back({send, send_elems * elem});
  if (recv != nullptr && recv != send && count > 0) ranges.push_back({recv, recv_elems * elem});
  return submit(fn, h, stream, {o}, ranges);
}

}  // namespace

extern "C" {

HcclResult HcclGetRootInfo(HcclRootInfo* rootInfo) {
  HCCL_ENTER("HcclGetRootInfo");
  if (rootInfo == nullptr) return fail(HCCL_E_PTR, "HcclGetRootInfo: rootInfo is NULL");
  tfl_comm_id id;
  emu_kit::make_unique_id(&id);
  static_assert(sizeof(rootInfo->internal) <= sizeof(id.bytes), "root info fits the engine id");
  std::memcpy(rootInfo->internal, id.bytes, sizeof(rootInfo->internal));
  return HCCL_SUCCESS;
}

HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo* rootInfo, uint32_t rank,
                                HcclComm* comm) {
  HCCL_ENTER("HcclCommInitRootInfo");
  if (rootInfo == nullptr || comm == nullptr) {
    return fail(HCCL_E_PTR, "HcclCommInitRootInfo: rootInfo or comm is NULL");
  }
  const int32_t device = aclEmuInternalCurrentDevice();
  if (device < 0) {
    return fail(HCCL_E_RUNTIME, "HcclCommInitRootInfo: no current device (call aclrtSetDevice)");
  }
  if (nRanks < 1 || nRanks > static_cast<uint32_t>(emu_kit::kMaxRanks) || rank >= nRanks) {
    return fail(HCCL_E_PARA, "HcclCommInitRootInfo: rank %u of %u (the emulator has at most %d)",
                rank, nRanks, emu_kit::kMaxRanks);
  }
  uint32_t timeout_ms = 0;
  std::string why;
  if (!emu_kit::default_timeout_ms(&timeout_ms, &why)) {
    return fail(HCCL_E_PARA, "HcclCommInitRootInfo: %s", why.c_str());
  }
  tfl_comm_id id;
  std::memset(id.bytes, 0, sizeof id.bytes);
  std::memcpy(id.bytes, rootInfo->internal, sizeof(rootInfo->internal));
  try {
    auto h = std::make_unique<Handle>();
    h->comm = std::make_shared<emu_kit::Comm>(static_cast<int>(nRanks), id, static_cast<int>(rank),
                                              device, timeout_ms);
    HcclComm handle = h.get();
    std::lock_guard<std::mutex> lk(g_mu);
    handles().emplace(handle, std::move(h));
    *comm = handle;
    return HCCL_SUCCESS;
  } catch (const emu_kit::CommError& e) {
    return fail(code_of(e.status()), "HcclCommInitRootInfo: %s", e.what());
  }
}

HcclResult HcclCommDestroy(HcclComm comm) {
  HCCL_ENTER("HcclCommDestroy");
  std::unique_ptr<Handle> h;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    auto it = handles().find(comm);
    if (it == handles().end()) {
      return fail(HCCL_E_PARA, "HcclCommDestroy: comm %p is not a live communicator", comm);
    }
    h = std::move(it->second);
    handles().erase(it);
  }
  // Queued operations keep the engine's communicator alive; breaking it ends their waits (and
  // their peers') instead of leaving them to the timeout.
  h->comm->destroyed.store(true);
  h->comm->abort();
  return HCCL_SUCCESS;
}

HcclResult HcclGetRankSize(HcclComm comm, uint32_t* rankSize) {
  HCCL_ENTER("HcclGetRankSize");
  Handle* h = lookup(comm);
  if (h == nullptr || rankSize == nullptr)
    return fail(HCCL_E_PARA, "HcclGetRankSize: bad argument");
  *rankSize = static_cast<uint32_t>(h->comm->nranks());
  return HCCL_SUCCESS;
}

HcclResult HcclGetRankId(HcclComm comm, uint32_t* rank) {
  HCCL_ENTER("HcclGetRankId");
  Handle* h = lookup(comm);
  if (h == nullptr || rank == nullptr) return fail(HCCL_E_PARA, "HcclGetRankId: bad argument");
  *rank = static_cast<uint32_t>(h->comm->rank());
  return HCCL_SUCCESS;
}

HcclResult HcclGetCommAsyncError(HcclComm comm, HcclResult* asyncError) {
  HCCL_ENTER("HcclGetCommAsyncError");
  Handle* h = lookup(comm);
  if (h == nullptr || asyncError == nullptr) {
    return fail(HCCL_E_PARA, "HcclGetCommAsyncError: bad argument");
  }
  std::string message;
  const tfl_status st = h->comm->error(&message);
  *asyncError = code_of(st);
  if (st != TFL_OK) aclEmuInternalSetErrMsg(message.c_str());
  return HCCL_SUCCESS;
}

const char* HcclGetErrorString(HcclResult code) {
  switch (code) {
    case HCCL_SUCCESS:
      return "success";
    case HCCL_E_PARA:
      return "parameter error";
    case HCCL_E_PTR:
      return "empty pointer";
    case HCCL_E_MEMORY:
      return "memory error";
    case HCCL_E_INTERNAL:
      return "internal error";
    case HCCL_E_NOT_SUPPORT:
      return "not support feature";
    case HCCL_E_TIMEOUT:
      return "timeout";
    case HCCL_E_RUNTIME:
      return "call runtime api fail";
    case HCCL_E_REMOTE:
      return "error cqe";
    default:
      return "HCCL error";
  }
}

HcclResult HcclAllReduce(void* sendBuf, void* recvBuf, uint64_t count, HcclDataType dataType,
                         HcclReduceOp op, HcclComm comm, aclrtStream stream) {
  HCCL_ENTER("HcclAllReduce");
  return one("HcclAllReduce", comm, stream, emu_kit::OpKind::all_reduce, sendBuf, recvBuf, count,
             dataType, op, -1, -1, true);
}

HcclResult HcclBroadcast(void* buf, uint64_t count, HcclDataType dataType, uint32_t root,
                         HcclComm comm, aclrtStream stream) {
  HCCL_ENTER("HcclBroadcast");
  return one("HcclBroadcast", comm, stream, emu_kit::OpKind::broadcast, buf, buf, count, dataType,
             0, static_cast<int>(root), -1, false);
}

HcclResult HcclReduce(void* sendBuf, void* recvBuf, uint64_t count, HcclDataType dataType,
                      HcclReduceOp op, uint32_t root, HcclComm comm, aclrtStream stream) {
  HCCL_ENTER("HcclReduce");
  return one("HcclReduce", comm, stream, emu_kit::OpKind::reduce, sendBuf, recvBuf, count, dataType,
             op, static_cast<int>(root), -1, true);
}

HcclResult HcclAllGather(void* sendBuf, void* recvBuf, uint64_t sendCount, HcclDataType dataType,
                         HcclComm comm, aclrtStream stream) {
  HCCL_ENTER("HcclAllGather");
  return one("HcclAllGather", comm, stream, emu_kit::OpKind::all_gather, sendBuf, recvBuf,
             sendCount, dataType, 0, -1, -1, false);
}

HcclResult HcclReduceScatter(void* sendBuf, void* recvBuf, uint64_t recvCount,
                             HcclDataType dataType, HcclReduceOp op, HcclComm comm,
                             aclrtStream stream) {
  HCCL_ENTER("HcclReduceScatter");
  return one("HcclReduceScatter", comm, stream, emu_kit::OpKind::reduce_scatter, sendBuf, recvBuf,
             recvCount, dataType, op, -1, -1, true);
}

HcclResult HcclAlltoAll(const void* sendBuf, uint64_t sendCount, HcclDataType sendType,
                        const void* recvBuf, uint64_t recvCount, HcclDataType recvType,
                        HcclComm comm, aclrtStream stream) {
  HCCL_ENTER("HcclAlltoAll");
  if (sendCount != recvCount || sendType != recvType) {
    return fail(HCCL_E_PARA,
                "HcclAlltoAll: the emulator takes equal send and receive counts and types (got "
                "%llu %s, %llu %s)",
                static_cast<unsigned long long>(sendCount), type_name(sendType),
                static_cast<unsigned long long>(recvCount), type_name(recvType));
  }
  return one("HcclAlltoAll", comm, stream, emu_kit::OpKind::all_to_all, sendBuf,
             const_cast<void*>(recvBuf), sendCount, sendType, 0, -1, -1, false);
}

HcclResult HcclSend(void* sendBuf, uint64_t count, HcclDataType dataType, uint32_t destRank,
                    HcclComm comm, aclrtStream stream) {
  HCCL_ENTER("HcclSend");
  return one("HcclSend", comm, stream, emu_kit::OpKind::send, sendBuf, nullptr, count, dataType, 0,
             -1, static_cast<int>(destRank), false);
}

HcclResult HcclRecv(void* recvBuf, uint64_t count, HcclDataType dataType, uint32_t srcRank,
                    HcclComm comm, aclrtStream stream) {
  HCCL_ENTER("HcclRecv");
  return one("HcclRecv", comm, stream, emu_kit::OpKind::recv, nullptr, recvBuf, count, dataType, 0,
             -1, static_cast<int>(srcRank), false);
}

HcclResult HcclBatchSendRecv(HcclSendRecvItem* items, uint32_t itemNum, HcclComm comm,
                             aclrtStream stream) {
  HCCL_ENTER("HcclBatchSendRecv");
  Handle* h = lookup(comm);
  if (h == nullptr) {
    return fail(HCCL_E_PARA, "HcclBatchSendRecv: comm %p is not a live communicator", comm);
  }
  if (items == nullptr && itemNum > 0) return fail(HCCL_E_PTR, "HcclBatchSendRecv: items is NULL");
  std::vector<emu_kit::Op> ops;
  std::vector<aclEmuRange> ranges;
  for (uint32_t i = 0; i < itemNum; ++i) {
    const HcclSendRecvItem& it = items[i];
    const int dtype = engine_dtype(it.dataType);
    if (dtype < 0) {
      return fail(HCCL_E_NOT_SUPPORT, "HcclBatchSendRecv: item %u: the emulator does not move %s",
                  i, type_name(it.dataType));
    }
    if (it.remoteRank >= static_cast<uint32_t>(h->comm->nranks()) ||
        (it.sendRecvType != HCCL_SEND && it.sendRecvType != HCCL_RECV)) {
      return fail(HCCL_E_PARA, "HcclBatchSendRecv: item %u: bad type or remote rank %u", i,
                  it.remoteRank);
    }
    emu_kit::Op o;
    o.kind = it.sendRecvType == HCCL_SEND ? emu_kit::OpKind::send : emu_kit::OpKind::recv;
    if (o.kind == emu_kit::OpKind::send) {
      o.send = it.buf;
    } else {
      o.recv = it.buf;
    }
    o.count = it.count;
    o.dtype = dtype;
    o.peer = static_cast<int>(it.remoteRank);
    o.comm = h->comm;
    ops.push_back(o);
    if (it.count > 0) ranges.push_back({it.buf, it.count * emu_kit::dtype_size(dtype)});
  }
  if (ops.empty()) return HCCL_SUCCESS;
  return submit("HcclBatchSendRecv", h, stream, std::move(ops), ranges);
}

}  // extern "C"
