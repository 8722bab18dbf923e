// The cuda vendor's collective library (torch_fl/collective.h) over NCCL's C
// API. NCCL is the one torch's CUDA wheel loads (libnccl.so.2, found by its
// soname once torch's CUDA libraries are in the process); its functions are
// looked up at first use, so this library builds without NCCL headers and
// loads on machines without NCCL (every call then says why it cannot run).
//
// The runtime is core's delegate runtime (flagos memory is CUDA memory):
// attach_runtime gives its table, whose native_stream turns a tfl_stream into
// the cudaStream_t NCCL enqueues on and whose set_device selects the device
// a communicator is made on.
#include <dlfcn.h>
#include <torch_fl/collective.h>
#include <torch_fl/kit/collective_library.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

namespace {

// ---- the slice of nccl.h used here (a stable C ABI since NCCL 2.7) --------
using ncclResult_t = int;
using ncclComm_t = struct ncclComm*;
struct ncclUniqueId {
  char internal[128];
};
constexpr ncclResult_t kNcclSuccess = 0;
constexpr ncclResult_t kNcclInvalidArgument = 4;
constexpr ncclResult_t kNcclInvalidUsage = 5;
constexpr ncclResult_t kNcclRemoteError = 6;
constexpr ncclResult_t kNcclInProgress = 7;
enum : int {
  kInt8 = 0,
  kUint8 = 1,
  kInt32 = 2,
  kInt64 = 4,
  kFloat16 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
  kBfloat16 = 9
};
enum : int { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4 };

struct Nccl {
  ncclResult_t (*GetUniqueId)(ncclUniqueId*);
  ncclResult_t (*CommInitRank)(ncclComm_t*, int, ncclUniqueId, int);
  ncclResult_t (*CommDestroy)(ncclComm_t);
  ncclResult_t (*CommAbort)(ncclComm_t);
  ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t*);
  const char* (*GetErrorString)(ncclResult_t);
  const char* (*GetLastError)(ncclComm_t);  // NCCL >= 2.13; may be absent
  ncclResult_t (*AllReduce)(const void*, void*, size_t, int, int, ncclComm_t, void*);
  ncclResult_t (*Broadcast)(const void*, void*, size_t, int, int, ncclComm_t, void*);
  ncclResult_t (*Reduce)(const void*, void*, size_t, int, int, int, ncclComm_t, void*);
  ncclResult_t (*AllGather)(const void*, void*, size_t, int, ncclComm_t, void*);
  ncclResult_t (*ReduceScatter)(const void*, void*, size_t, int, int, ncclComm_t, void*);
  ncclResult_t (*Send)(const void*, size_t, int, int, ncclComm_t, void*);
  ncclResult_t (*Recv)(void*, size_t, int, int, ncclComm_t, void*);
  ncclResult_t (*GroupStart)();
  ncclResult_t (*GroupEnd)();
};

tfl_status fail(tfl_status status, const char* format, ...) {
  char buffer[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  return torch_fl::kit::fail(status, buffer);
}

std::once_flag g_load_once;
Nccl g_nccl{};
std::string g_load_error;  // why NCCL is not usable here ("" when it is)
torch_fl::kit::AttachedRuntime g_runtime;

void load_nccl() {
  void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
  if (lib == nullptr) lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    g_load_error = std::string("libnccl.so.2 cannot be loaded (") + (why ? why : "?") +
                   "); a CUDA build of torch ships it (the nvidia-nccl wheel)";
    return;
  }
  std::string missing;
  auto get = [&](const char* name, bool required) -> void* {
    void* f = dlsym(lib, name);
    if (f == nullptr && required) missing += std::string(" ") + name;
    return f;
  };
#define TFL_NCCL(field, required) \
  g_nccl.field = reinterpret_cast<decltype(g_nccl.field)>(get("nccl" #field, required))
  TFL_NCCL(GetUniqueId, true);
  TFL_NCCL(CommInitRank, true);
  TFL_NCCL(CommDestroy, true);
  TFL_NCCL(CommAbort, true);
  TFL_NCCL(CommGetAsyncError, true);
  TFL_NCCL(GetErrorString, true);
  TFL_NCCL(GetLastError, false);
  TFL_NCCL(AllReduce, true);
  TFL_NCCL(Broadcast, true);
  TFL_NCCL(Reduce, true);
  TFL_NCCL(AllGather, true);
  TFL_NCCL(ReduceScatter, true);
  TFL_NCCL(Send, true);
  TFL_NCCL(Recv, true);
  TFL_NCCL(GroupStart, true);
  TFL_NCCL(GroupEnd, true);
#undef TFL_NCCL
  if (!missing.empty()) g_load_error = "libnccl.so.2 lacks" + missing;
}

// The library's prologue: NCCL loaded, the runtime attached.
tfl_status ready(const char* fn) {
  std::call_once(g_load_once, load_nccl);
  if (!g_load_error.empty())
    return fail(TFL_ERROR_NOT_SUPPORTED, "%s: %s", fn, g_load_error.c_str());
  return g_runtime.require(fn);
}

using Comm = torch_fl::kit::CommRecord<ncclComm_t>;

std::string who(const Comm* c) { return c->who(); }

tfl_status status_of(ncclResult_t r) {
  switch (r) {
    case kNcclSuccess:
      return TFL_OK;
    case kNcclInvalidArgument:
    case kNcclInvalidUsage:
      return TFL_ERROR_INVALID_VALUE;
    case kNcclRemoteError:
      return TFL_ERROR_ABORTED;
    default:
      return TFL_ERROR_DEVICE;
  }
}

// A failed NCCL call: the status, and NCCL's own words in last_error().
tfl_status nccl_fail(ncclResult_t r, const char* fn, const Comm* c) {
  const char* detail = c && c->sdk && g_nccl.GetLastError ? g_nccl.GetLastError(c->sdk) : "";
  return fail(status_of(r), "%s: %s: NCCL error %d (%s)%s%s", fn, c ? who(c).c_str() : "NCCL", r,
              g_nccl.GetErrorString(r), detail && *detail ? ": " : "", detail ? detail : "");
}

// Checks a communicator before an operation: usable, not failed or aborted.
tfl_status usable(const char* fn, tfl_comm handle, Comm** out) {
  if (tfl_status st = ready(fn); st != TFL_OK) return st;
  if (tfl_status st = torch_fl::kit::comm_record(fn, handle, out); st != TFL_OK) return st;
  return (*out)->usable(fn);
}

// NCCL's type and reduction for a tfl pair. bool is one byte of 0/1: "or" is
// MAX and "and" is MIN on uint8 (collective.h's logical reductions).
tfl_status types(const char* fn, int dtype, int op, bool reduces, int* nd, int* nop) {
  static const int kTypes[TFL_DTYPE_COUNT] = {kFloat16, kBfloat16, kFloat32, kFloat64, kInt8,
                                              kUint8,   kInt32,    kInt64,   kUint8};
  if (dtype < 0 || dtype >= TFL_DTYPE_COUNT) {
    return fail(TFL_ERROR_INVALID_VALUE, "%s: unknown dtype %d", fn, dtype);
  }
  *nd = kTypes[dtype];
  if (!reduces) return TFL_OK;
  static const int kOps[TFL_REDUCE_OP_COUNT] = {kSum, kProd, kMin, kMax, kAvg};
  if (op < 0 || op >= TFL_REDUCE_OP_COUNT) {
    return fail(TFL_ERROR_INVALID_VALUE, "%s: unknown reduction %d", fn, op);
  }
  *nop = kOps[op];
  if (dtype == TFL_DTYPE_BOOL) {
    if (op == TFL_REDUCE_AVG) {
      return fail(TFL_ERROR_NOT_SUPPORTED, "%s: AVG is not defined for bool", fn);
    }
    *nop = torch_fl::kit::bool_reduces_as_max(op) ? kMax : kMin;
  }
  if (op == TFL_REDUCE_AVG && dtype != TFL_DTYPE_F16 && dtype != TFL_DTYPE_BF16 &&
      dtype != TFL_DTYPE_F32 && dtype != TFL_DTYPE_F64) {
    return fail(TFL_ERROR_NOT_SUPPORTED, "%s: NCCL's AVG is for floating types only", fn);
  }
  return TFL_OK;
}

// ---- the table ------------------------------------------------------------
const char* c_status_name(tfl_status status) { return torch_fl::kit::status_name(status); }

const char* c_last_error() { return torch_fl::kit::last_error(); }

tfl_status c_attach_runtime(const tfl_runtime_v1* runtime) {
  return g_runtime.attach(runtime, "NCCL");
}

tfl_status c_unique_id(tfl_comm_id* id) {
  tfl_status st = ready("tfl_unique_id");
  if (st != TFL_OK) return st;
  if (id == nullptr) return fail(TFL_ERROR_INVALID_VALUE, "tfl_unique_id: id is NULL");
  ncclUniqueId nid;
  const ncclResult_t r = g_nccl.GetUniqueId(&nid);
  if (r != kNcclSuccess) return nccl_fail(r, "tfl_unique_id", nullptr);
  std::memset(id->bytes, 0, sizeof(id->bytes));
  std::memcpy(id->bytes, nid.internal, sizeof(nid.internal));
  return TFL_OK;
}

tfl_status c_comm_init(tfl_comm* out, int nranks, const tfl_comm_id* id, int rank, int device,
                       uint32_t /*timeout_ms: NCCL's blocking init has none; see docs*/) {
  tfl_status st = ready("tfl_comm_init");
  if (st != TFL_OK) return st;
  if (tfl_status bad = torch_fl::kit::check_comm_init(out, nranks, id, rank); bad != TFL_OK) {
    return bad;
  }
  ncclUniqueId nid;
  std::memcpy(nid.internal, id->bytes, sizeof(nid.internal));
  auto* c = torch_fl::kit::new_record<Comm>("NCCL", rank, nranks, device);
  // ncclCommInitRank makes the communicator on the current CUDA device.
  st = g_runtime.on_device("tfl_comm_init", device, [&] {
    const ncclResult_t r = g_nccl.CommInitRank(&c->sdk, nranks, nid, rank);
    return r == kNcclSuccess ? TFL_OK : nccl_fail(r, "tfl_comm_init", c);
  });
  if (st != TFL_OK) {
    delete c;
    return st;
  }
  *out = reinterpret_cast<tfl_comm>(c);
  return TFL_OK;
}

tfl_status c_comm_destroy(tfl_comm handle) {
  tfl_status st = ready("tfl_comm_destroy");
  if (st != TFL_OK) return st;
  if (handle == nullptr) return fail(TFL_ERROR_INVALID_HANDLE, "tfl_comm_destroy: NULL");
  Comm* c = reinterpret_cast<Comm*>(handle);
  // An aborted communicator was already released by ncclCommAbort.
  const ncclResult_t r = c->aborted.load() ? kNcclSuccess : g_nccl.CommDestroy(c->sdk);
  delete c;
  return r == kNcclSuccess ? TFL_OK : nccl_fail(r, "tfl_comm_destroy", nullptr);
}

tfl_status c_comm_abort(tfl_comm handle) {
  tfl_status st = ready("tfl_comm_abort");
  if (st != TFL_OK) return st;
  if (handle == nullptr) return fail(TFL_ERROR_INVALID_HANDLE, "tfl_comm_abort: NULL");
  Comm* c = reinterpret_cast<Comm*>(handle);
  if (c->aborted.exchange(true)) return TFL_OK;
  const ncclResult_t r = g_nccl.CommAbort(c->sdk);
  return r == kNcclSuccess ? TFL_OK : nccl_fail(r, "tfl_comm_abort", c);
}

tfl_status c_comm_async_error(tfl_comm handle, tfl_status* error) {
  if (tfl_status st = ready("tfl_comm_async_error"); st != TFL_OK) return st;
  Comm* c = nullptr;
  if (tfl_status st = torch_fl::kit::comm_record("tfl_comm_async_error", handle, &c);
      st != TFL_OK) {
    return st;
  }
  if (error == nullptr) return fail(TFL_ERROR_INVALID_VALUE, "tfl_comm_async_error: error is NULL");
  if (!c->aborted.load() && c->first_error.load() == TFL_OK) {
    ncclResult_t async = kNcclSuccess;
    const ncclResult_t r = g_nccl.CommGetAsyncError(c->sdk, &async);
    if (r != kNcclSuccess) return nccl_fail(r, "tfl_comm_async_error", c);
    if (async != kNcclSuccess && async != kNcclInProgress) {
      c->keep_first_failure(nccl_fail(async, "an enqueued operation", c));
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

// One stream-ordered NCCL call: checks, types, the CUDA stream, the call.
template <class Call>
tfl_status issue(const char* fn, tfl_comm handle, tfl_stream stream, int dtype, int op,
                 bool reduces, Call&& call) {
  Comm* c = nullptr;
  tfl_status st = usable(fn, handle, &c);
  if (st != TFL_OK) return st;
  int nd = 0;
  int nop = 0;
  st = types(fn, dtype, op, reduces, &nd, &nop);
  if (st != TFL_OK) return st;
  void* cuda = nullptr;
  st = g_runtime.sdk_stream(fn, stream, c->device, &cuda, who(c));
  if (st != TFL_OK) return st;
  const ncclResult_t r = call(c, nd, nop, cuda);
  return r == kNcclSuccess ? TFL_OK : nccl_fail(r, fn, c);
}

tfl_status c_all_reduce(const void* send, void* recv, size_t count, int dtype, int op,
                        tfl_comm comm, tfl_stream stream) {
  return issue("tfl_all_reduce", comm, stream, dtype, op, true,
               [&](Comm* c, int t, int o, void* s) {
                 return g_nccl.AllReduce(send, recv, count, t, o, c->sdk, s);
               });
}

tfl_status c_broadcast(const void* send, void* recv, size_t count, int dtype, int root,
                       tfl_comm comm, tfl_stream stream) {
  return issue("tfl_broadcast", comm, stream, dtype, 0, false, [&](Comm* c, int t, int, void* s) {
    return g_nccl.Broadcast(send, recv, count, t, root, c->sdk, s);
  });
}

tfl_status c_reduce(const void* send, void* recv, size_t count, int dtype, int op, int root,
                    tfl_comm comm, tfl_stream stream) {
  return issue("tfl_reduce", comm, stream, dtype, op, true, [&](Comm* c, int t, int o, void* s) {
    return g_nccl.Reduce(send, recv, count, t, o, root, c->sdk, s);
  });
}

tfl_status c_all_gather(const void* send, void* recv, size_t count, int dtype, tfl_comm comm,
                        tfl_stream stream) {
  return issue("tfl_all_gather", comm, stream, dtype, 0, false, [&](Comm* c, int t, int, void* s) {
    return g_nccl.AllGather(send, recv, count, t, c->sdk, s);
  });
}

tfl_status c_reduce_scatter(const void* send, void* recv, size_t count, int dtype, int op,
                            tfl_comm comm, tfl_stream stream) {
  return issue("tfl_reduce_scatter", comm, stream, dtype, op, true,
               [&](Comm* c, int t, int o, void* s) {
                 return g_nccl.ReduceScatter(send, recv, count, t, o, c->sdk, s);
               });
}

tfl_status c_all_to_all(const void* send, void* recv, size_t count, int dtype, tfl_comm comm,
                        tfl_stream stream) {
  // NCCL has no all-to-all call: one send and one receive per rank in a group.
  return issue("tfl_all_to_all", comm, stream, dtype, 0, false, [&](Comm* c, int t, int, void* s) {
    const size_t bytes = count * torch_fl::kit::dtype_bytes(dtype);
    ncclResult_t r = g_nccl.GroupStart();
    for (int p = 0; p < c->nranks && r == kNcclSuccess; ++p) {
      r = g_nccl.Send(static_cast<const char*>(send) + p * bytes, count, t, p, c->sdk, s);
      if (r == kNcclSuccess) {
        r = g_nccl.Recv(static_cast<char*>(recv) + p * bytes, count, t, p, c->sdk, s);
      }
    }
    const ncclResult_t end = g_nccl.GroupEnd();
    return r != kNcclSuccess ? r : end;
  });
}

tfl_status c_send(const void* buf, size_t count, int dtype, int peer, tfl_comm comm,
                  tfl_stream stream) {
  return issue("tfl_send", comm, stream, dtype, 0, false, [&](Comm* c, int t, int, void* s) {
    return g_nccl.Send(buf, count, t, peer, c->sdk, s);
  });
}

tfl_status c_recv(void* buf, size_t count, int dtype, int peer, tfl_comm comm, tfl_stream stream) {
  return issue("tfl_recv", comm, stream, dtype, 0, false, [&](Comm* c, int t, int, void* s) {
    return g_nccl.Recv(buf, count, t, peer, c->sdk, s);
  });
}

tfl_status c_group_start() {
  const tfl_status st = ready("tfl_group_start");
  if (st != TFL_OK) return st;
  const ncclResult_t r = g_nccl.GroupStart();
  return r == kNcclSuccess ? TFL_OK : nccl_fail(r, "tfl_group_start", nullptr);
}

tfl_status c_group_end() {
  const tfl_status st = ready("tfl_group_end");
  if (st != TFL_OK) return st;
  const ncclResult_t r = g_nccl.GroupEnd();
  return r == kNcclSuccess ? TFL_OK : nccl_fail(r, "tfl_group_end", nullptr);
}

const tfl_collective_v1 kTable = {
    /*abi_version=*/TFL_COLLECTIVE_ABI_VERSION,
    /*struct_size=*/sizeof(tfl_collective_v1),
    /*name=*/"nccl",
    /*status_name=*/c_status_name,
    /*last_error=*/c_last_error,
    /*unique_id=*/c_unique_id,
    /*comm_init=*/c_comm_init,
    /*comm_split=*/nullptr,  // core makes sub-groups from fresh ids
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
