// The ascend vendor's collective library (torch_fl/collective.h) over HCCL's C API (hccl.h):
// root-info communicators, HCCL's collectives and point to point, on the aclrtStream the
// attached runtime gives for each flagos stream. What HCCL lacks, mapped here:
//  - groups: kept per thread; at the outermost group_end the group's sends and receives on one
//    communicator and stream go as one HcclBatchSendRecv (so rings and all pairs progress
//    together), collectives in issue order;
//  - AVG: HCCL has none (TFL_ERROR_NOT_SUPPORTED: core then sums and divides);
//  - fp64, and uint8 other than MAX/MIN, are not HCCL reduction types (TFL_ERROR_NOT_SUPPORTED:
//    core then all-gathers and reduces on the device);
//  - bool: unsigned bytes reduced with MAX ("or") or MIN ("and");
//  - abort: HCCL has no abort call; a flag every later call checks, then HcclCommDestroy, which
//    ends queued operations' waits.
#include <acl/acl.h>
#include <hccl/hccl.h>
#include <torch_fl/collective.h>
#include <torch_fl/kit/collective_library.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace {

torch_fl::kit::AttachedRuntime g_runtime;

tfl_status fail(tfl_status status, const char* format, ...) __attribute__((format(printf, 2, 3)));
tfl_status fail(tfl_status status, const char* format, ...) {
  char buffer[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  return torch_fl::kit::fail(status, buffer);
}

using Comm = torch_fl::kit::CommRecord<HcclComm>;

std::string who(const Comm* c) { return c->who(); }

tfl_status status_of(HcclResult r) {
  switch (r) {
    case HCCL_SUCCESS:
      return TFL_OK;
    case HCCL_E_PARA:
      return TFL_ERROR_INVALID_VALUE;
    case HCCL_E_PTR:
      return TFL_ERROR_INVALID_POINTER;
    case HCCL_E_NOT_SUPPORT:
      return TFL_ERROR_NOT_SUPPORTED;
    case HCCL_E_MEMORY:
      return TFL_ERROR_OUT_OF_MEMORY;
    case HCCL_E_TIMEOUT:
      return TFL_ERROR_TIMEOUT;
    case HCCL_E_REMOTE:
      return TFL_ERROR_ABORTED;
    default:
      return TFL_ERROR_DEVICE;
  }
}

// A failed HCCL call: the status, HCCL's name for it and CANN's recent message.
tfl_status hccl_fail(HcclResult r, const char* fn, const Comm* c) {
  const char* detail = aclGetRecentErrMsg();
  return fail(status_of(r), "%s: %s: HCCL error %d (%s)%s%s", fn, c ? who(c).c_str() : "HCCL",
              static_cast<int>(r), HcclGetErrorString(r), detail && *detail ? ": " : "",
              detail ? detail : "");
}

tfl_status usable(const char* fn, tfl_comm handle, Comm** out) {
  if (tfl_status st = g_runtime.require(fn); st != TFL_OK) return st;
  if (tfl_status st = torch_fl::kit::comm_record(fn, handle, out); st != TFL_OK) return st;
  return (*out)->usable(fn);
}

// HCCL's type and reduction for a tfl pair.
tfl_status types(const char* fn, int dtype, int op, bool reduces, HcclDataType* ht,
                 HcclReduceOp* hop) {
  static const HcclDataType kTypes[TFL_DTYPE_COUNT] = {
      HCCL_DATA_TYPE_FP16,  HCCL_DATA_TYPE_BFP16, HCCL_DATA_TYPE_FP32,
      HCCL_DATA_TYPE_FP64,  HCCL_DATA_TYPE_INT8,  HCCL_DATA_TYPE_UINT8,
      HCCL_DATA_TYPE_INT32, HCCL_DATA_TYPE_INT64, HCCL_DATA_TYPE_UINT8};
  if (dtype < 0 || dtype >= TFL_DTYPE_COUNT) {
    return fail(TFL_ERROR_INVALID_VALUE, "%s: unknown dtype %d", fn, dtype);
  }
  *ht = kTypes[dtype];
  if (!reduces) return TFL_OK;
  switch (op) {
    case TFL_REDUCE_SUM:
      *hop = HCCL_REDUCE_SUM;
      break;
    case TFL_REDUCE_PROD:
      *hop = HCCL_REDUCE_PROD;
      break;
    case TFL_REDUCE_MIN:
      *hop = HCCL_REDUCE_MIN;
      break;
    case TFL_REDUCE_MAX:
      *hop = HCCL_REDUCE_MAX;
      break;
    case TFL_REDUCE_AVG:
      return fail(TFL_ERROR_NOT_SUPPORTED, "%s: HCCL has no AVG reduction", fn);
    default:
      return fail(TFL_ERROR_INVALID_VALUE, "%s: unknown reduction %d", fn, op);
  }
  if (dtype == TFL_DTYPE_BOOL) {
    *hop = torch_fl::kit::bool_reduces_as_max(op) ? HCCL_REDUCE_MAX : HCCL_REDUCE_MIN;
  }
  // HCCL's documented reduction types: no fp64, uint8 for MAX/MIN only. Refused before anything
  // is queued (inside a group too), so core gathers and reduces them on the device.
  if (dtype == TFL_DTYPE_F64 ||
      (dtype == TFL_DTYPE_U8 && *hop != HCCL_REDUCE_MAX && *hop != HCCL_REDUCE_MIN)) {
    return fail(TFL_ERROR_NOT_SUPPORTED, "%s: HCCL does not reduce %s data with this operation", fn,
                dtype == TFL_DTYPE_F64 ? "fp64" : "uint8");
  }
  return TFL_OK;
}

// One validated operation, issued now or at the outermost group_end.
struct Op {
  enum Kind { all_reduce, broadcast, reduce, all_gather, reduce_scatter, all_to_all, send, recv };
  Kind kind;
  const void* send_buf;
  void* recv_buf;
  uint64_t count;
  HcclDataType type;
  HcclReduceOp op;
  int root;
  int peer;
  Comm* comm;
  void* stream;  // aclrtStream
};

const char* name_of(Op::Kind k) {
  static const char* names[] = {"HcclAllReduce",     "HcclBroadcast", "HcclReduce", "HcclAllGather",
                                "HcclReduceScatter", "HcclAlltoAll",  "HcclSend",   "HcclRecv"};
  return names[k];
}

HcclResult call(const Op& o) {
  HcclComm h = o.comm->sdk;
  auto* s = static_cast<aclrtStream>(o.stream);
  void* send = const_cast<void*>(o.send_buf);
  switch (o.kind) {
    case Op::all_reduce:
      return HcclAllReduce(send, o.recv_buf, o.count, o.type, o.op, h, s);
    case Op::broadcast: {
      // HCCL broadcasts in place: the root's data must be in the buffer every rank receives in.
      return HcclBroadcast(o.recv_buf, o.count, o.type, static_cast<uint32_t>(o.root), h, s);
    }
    case Op::reduce:
      return HcclReduce(send, o.recv_buf ? o.recv_buf : send, o.count, o.type, o.op,
                        static_cast<uint32_t>(o.root), h, s);
    case Op::all_gather:
      return HcclAllGather(send, o.recv_buf, o.count, o.type, h, s);
    case Op::reduce_scatter:
      return HcclReduceScatter(send, o.recv_buf, o.count, o.type, o.op, h, s);
    case Op::all_to_all:
      return HcclAlltoAll(o.send_buf, o.count, o.type, o.recv_buf, o.count, o.type, h, s);
    case Op::send:
      return HcclSend(send, o.count, o.type, static_cast<uint32_t>(o.peer), h, s);
    case Op::recv:
      return HcclRecv(o.recv_buf, o.count, o.type, static_cast<uint32_t>(o.peer), h, s);
  }
  return HCCL_E_PARA;
}

struct Group {
  int depth = 0;
  std::vector<Op> ops;
};
thread_local Group t_group;

// Issues `ops` in order; consecutive sends and receives of one communicator and stream go as
// one HcclBatchSendRecv.
tfl_status issue_all(const std::vector<Op>& ops) {
  size_t i = 0;
  while (i < ops.size()) {
    const Op& o = ops[i];
    const bool p2p = o.kind == Op::send || o.kind == Op::recv;
    if (!p2p) {
      const HcclResult r = call(o);
      if (r != HCCL_SUCCESS) return hccl_fail(r, name_of(o.kind), o.comm);
      ++i;
      continue;
    }
    std::vector<HcclSendRecvItem> items;
    size_t j = i;
    for (; j < ops.size(); ++j) {
      const Op& p = ops[j];
      if ((p.kind != Op::send && p.kind != Op::recv) || p.comm != o.comm || p.stream != o.stream) {
        break;
      }
      items.push_back({p.kind == Op::send ? HCCL_SEND : HCCL_RECV,
                       p.kind == Op::send ? const_cast<void*>(p.send_buf) : p.recv_buf, p.count,
                       p.type, static_cast<uint32_t>(p.peer)});
    }
    const HcclResult r = HcclBatchSendRecv(items.data(), static_cast<uint32_t>(items.size()),
                                           o.comm->sdk, static_cast<aclrtStream>(o.stream));
    if (r != HCCL_SUCCESS) return hccl_fail(r, "HcclBatchSendRecv", o.comm);
    i = j;
  }
  return TFL_OK;
}

tfl_status submit(const char* fn, tfl_comm handle, tfl_stream stream, Op o, int dtype, int op,
                  bool reduces) {
  Comm* c = nullptr;
  if (tfl_status st = usable(fn, handle, &c); st != TFL_OK) return st;
  if (tfl_status st = types(fn, dtype, op, reduces, &o.type, &o.op); st != TFL_OK) return st;
  if ((o.root >= c->nranks) || (o.peer >= c->nranks)) {
    return fail(TFL_ERROR_INVALID_VALUE, "%s: %s has no rank %d", fn, who(c).c_str(),
                o.root >= c->nranks ? o.root : o.peer);
  }
  if (tfl_status st = g_runtime.sdk_stream(fn, stream, c->device, &o.stream, who(c));
      st != TFL_OK) {
    return st;
  }
  o.comm = c;
  if (t_group.depth > 0) {
    t_group.ops.push_back(o);
    return TFL_OK;
  }
  return issue_all({o});
}

Op make(Op::Kind kind, const void* send, void* recv, size_t count, int root = -1, int peer = -1) {
  Op o{};
  o.kind = kind;
  o.send_buf = send;
  o.recv_buf = recv;
  o.count = count;
  o.root = root;
  o.peer = peer;
  return o;
}

// ---- the table ------------------------------------------------------------
const char* c_status_name(tfl_status status) { return torch_fl::kit::status_name(status); }
const char* c_last_error() { return torch_fl::kit::last_error(); }
tfl_status c_attach_runtime(const tfl_runtime_v1* runtime) {
  return g_runtime.attach(runtime, "HCCL");
}

tfl_status c_unique_id(tfl_comm_id* id) {
  if (tfl_status st = g_runtime.require("tfl_unique_id"); st != TFL_OK) return st;
  if (id == nullptr) return fail(TFL_ERROR_INVALID_VALUE, "tfl_unique_id: id is NULL");
  HcclRootInfo root;
  const HcclResult r = HcclGetRootInfo(&root);
  if (r != HCCL_SUCCESS) return hccl_fail(r, "tfl_unique_id (HcclGetRootInfo)", nullptr);
  static_assert(sizeof(root.internal) <= TFL_COMM_ID_SIZE, "HcclRootInfo fits tfl_comm_id");
  std::memset(id->bytes, 0, sizeof(id->bytes));
  std::memcpy(id->bytes, root.internal, sizeof(root.internal));
  return TFL_OK;
}

tfl_status c_comm_init(
    tfl_comm* out, int nranks, const tfl_comm_id* id, int rank, int device,
    uint32_t /*timeout_ms: HCCL takes HCCL_CONNECT_TIMEOUT / HCCL_EXEC_TIMEOUT*/) {
  if (tfl_status st = g_runtime.require("tfl_comm_init"); st != TFL_OK) return st;
  if (tfl_status bad = torch_fl::kit::check_comm_init(out, nranks, id, rank); bad != TFL_OK) {
    return bad;
  }
  HcclRootInfo root;
  std::memcpy(root.internal, id->bytes, sizeof(root.internal));
  auto* c = torch_fl::kit::new_record<Comm>("HCCL", rank, nranks, device);
  // HcclCommInitRootInfo makes the communicator on the current device.
  const tfl_status st = g_runtime.on_device("tfl_comm_init", device, [&] {
    const HcclResult r = HcclCommInitRootInfo(static_cast<uint32_t>(nranks), &root,
                                              static_cast<uint32_t>(rank), &c->sdk);
    return r == HCCL_SUCCESS ? TFL_OK : hccl_fail(r, "tfl_comm_init (HcclCommInitRootInfo)", c);
  });
  if (st != TFL_OK) {
    delete c;
    return st;
  }
  *out = reinterpret_cast<tfl_comm>(c);
  return TFL_OK;
}

tfl_status c_comm_destroy(tfl_comm handle) {
  if (handle == nullptr) return fail(TFL_ERROR_INVALID_HANDLE, "tfl_comm_destroy: NULL");
  Comm* c = reinterpret_cast<Comm*>(handle);
  const HcclResult r = c->aborted.load() ? HCCL_SUCCESS : HcclCommDestroy(c->sdk);
  const tfl_status st = r == HCCL_SUCCESS ? TFL_OK : hccl_fail(r, "tfl_comm_destroy", c);
  delete c;
  return st;
}

tfl_status c_comm_abort(tfl_comm handle) {
  if (handle == nullptr) return fail(TFL_ERROR_INVALID_HANDLE, "tfl_comm_abort: NULL");
  Comm* c = reinterpret_cast<Comm*>(handle);
  if (c->aborted.exchange(true)) return TFL_OK;
  const HcclResult r = HcclCommDestroy(c->sdk);
  return r == HCCL_SUCCESS ? TFL_OK : hccl_fail(r, "tfl_comm_abort (HcclCommDestroy)", c);
}

tfl_status c_comm_async_error(tfl_comm handle, tfl_status* error) {
  Comm* c = nullptr;
  if (tfl_status st = torch_fl::kit::comm_record("tfl_comm_async_error", handle, &c);
      st != TFL_OK) {
    return st;
  }
  if (error == nullptr) return fail(TFL_ERROR_INVALID_VALUE, "tfl_comm_async_error: error is NULL");
  if (!c->aborted.load() && c->first_error.load() == TFL_OK) {
    HcclResult async = HCCL_SUCCESS;
    const HcclResult r = HcclGetCommAsyncError(c->sdk, &async);
    if (r != HCCL_SUCCESS) return hccl_fail(r, "tfl_comm_async_error", c);
    if (async != HCCL_SUCCESS) {
      c->keep_first_failure(hccl_fail(async, "an enqueued operation", c));
    }
  }
  return c->answer_async_error(error);
}

tfl_status c_comm_info(tfl_comm handle, int* rank, int* nranks, int* device) {
  Comm* c = nullptr;
  if (tfl_status st = torch_fl::kit::comm_record("tfl_comm_info", handle, &c); st != TFL_OK) {
    return st;
  }
  return c->info(rank, nranks, device);
}

tfl_status c_all_reduce(const void* send, void* recv, size_t count, int dtype, int op,
                        tfl_comm comm, tfl_stream stream) {
  return submit("tfl_all_reduce", comm, stream, make(Op::all_reduce, send, recv, count), dtype, op,
                true);
}

tfl_status c_broadcast(const void* send, void* recv, size_t count, int dtype, int root,
                       tfl_comm comm, tfl_stream stream) {
  Comm* c = nullptr;
  if (tfl_status st = usable("tfl_broadcast", comm, &c); st != TFL_OK) return st;
  if (c->rank == root && send != recv && count > 0) {
    return fail(TFL_ERROR_NOT_SUPPORTED,
                "tfl_broadcast: %s: HCCL broadcasts in place (the root's send must be its recv)",
                who(c).c_str());
  }
  return submit("tfl_broadcast", comm, stream, make(Op::broadcast, send, recv, count, root), dtype,
                0, false);
}

tfl_status c_reduce(const void* send, void* recv, size_t count, int dtype, int op, int root,
                    tfl_comm comm, tfl_stream stream) {
  return submit("tfl_reduce", comm, stream, make(Op::reduce, send, recv, count, root), dtype, op,
                true);
}

tfl_status c_all_gather(const void* send, void* recv, size_t count, int dtype, tfl_comm comm,
                        tfl_stream stream) {
  return submit("tfl_all_gather", comm, stream, make(Op::all_gather, send, recv, count), dtype, 0,
                false);
}

tfl_status c_reduce_scatter(const void* send, void* recv, size_t count, int dtype, int op,
                            tfl_comm comm, tfl_stream stream) {
  return submit("tfl_reduce_scatter", comm, stream, make(Op::reduce_scatter, send, recv, count),
                dtype, op, true);
}

tfl_status c_all_to_all(const void* send, void* recv, size_t count, int dtype, tfl_comm comm,
                        tfl_stream stream) {
  return submit("tfl_all_to_all", comm, stream, make(Op::all_to_all, send, recv, count), dtype, 0,
                false);
}

tfl_status c_send(const void* buf, size_t count, int dtype, int peer, tfl_comm comm,
                  tfl_stream stream) {
  return submit("tfl_send", comm, stream, make(Op::send, buf, nullptr, count, -1, peer), dtype, 0,
                false);
}

tfl_status c_recv(void* buf, size_t count, int dtype, int peer, tfl_comm comm, tfl_stream stream) {
  return submit("tfl_recv", comm, stream, make(Op::recv, nullptr, buf, count, -1, peer), dtype, 0,
                false);
}

tfl_status c_group_start() {
  ++t_group.depth;
  return TFL_OK;
}

tfl_status c_group_end() {
  if (t_group.depth == 0) {
    return fail(TFL_ERROR_INVALID_VALUE, "tfl_group_end: no group_start on this thread");
  }
  if (--t_group.depth > 0) return TFL_OK;
  std::vector<Op> ops;
  ops.swap(t_group.ops);
  return issue_all(ops);
}

const tfl_collective_v1 kTable = {
    /*abi_version=*/TFL_COLLECTIVE_ABI_VERSION,
    /*struct_size=*/sizeof(tfl_collective_v1),
    /*name=*/"hccl",
    /*status_name=*/c_status_name,
    /*last_error=*/c_last_error,
    /*unique_id=*/c_unique_id,
    /*comm_init=*/c_comm_init,
    /*comm_split=*/nullptr,  // core makes sub-groups from fresh root infos
    /*comm_destroy=*/c_comm_destroy,
    /*comm_abort=*/c_comm_abort,
    /*comm_async_error=*/c_comm_async_error,
    /*comm_info=*/c_comm_info,
    /*all_reduce=*/c_all_reduce,
    /*broadcast=*/c_broadcast,
    /*reduce=*/c_reduce,
    /*all_gather=*/c_all_gather,
    /*reduce_scatter=*/c_reduce_scatter,
    /*all_to_all=*/c_all_to_all,
    /*send=*/c_send,
    /*recv=*/c_recv,
    /*group_start=*/c_group_start,
    /*group_end=*/c_group_end,
    /*attach_runtime=*/c_attach_runtime,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const tfl_collective_v1* tfl_collective_get(
    uint32_t abi_version) {
  return abi_version == TFL_COLLECTIVE_ABI_VERSION ? &kTable : nullptr;
}
