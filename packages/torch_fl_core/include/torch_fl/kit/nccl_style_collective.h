// A vendor's whole collective library (collective.h) over an NCCL-style C API:
// NCCL itself and the libraries made in its image (Enflame's ECCL; Moore
// Threads' MCCL, ...), whose functions have NCCL's shapes and keep its enum
// values for results, element types and reductions. The SDK library is
// loaded at first use (dlopen by soname, each function by prefix + NCCL's
// name), so the collective library builds without the SDK's headers and loads
// where the SDK is missing: every call then says why it cannot run.
//
// A vendor's library is its dialect and one line:
//
//   struct Eccl {
//     static constexpr const char* kLibrary = "ECCL";     // in messages
//     static constexpr const char* kTable = "eccl";       // tfl_collective_v1.name
//     static constexpr const char* kPrefix = "eccl";      // eccl + AllReduce, ...
//     static constexpr const char* kSoname = "libeccl.so";
//     static constexpr const char* kMissing = "...";      // how a user gets it
//     static constexpr bool kReduces64Bit = false;  // reductions of int64 / float64
//     static constexpr bool kMixedGroups = false;   // one group may mix operation kinds
//   };
//   TFL_NCCL_STYLE_COLLECTIVE(Eccl)
//
// What the mapping decides for every dialect:
//  - broadcast, all_gather, all_to_all, send and recv move bytes (uint8 of
//    count * element size): they copy, so any element type travels, also on
//    a library that moves only some types;
//  - reductions map the type; bool is one byte reduced with MAX ("or") or
//    MIN ("and"); AVG is for floating types; a type the dialect cannot
//    reduce is TFL_ERROR_NOT_SUPPORTED, before anything is queued (core then
//    gathers and reduces on the device);
//  - all_to_all is one send and one receive per rank inside a group;
//  - groups: passed to the library where a group may mix operation kinds;
//    elsewhere kept per thread and issued at the outermost group_end as one
//    library group per run of operations of one kind (sends, receives and
//    all-to-alls are one kind), in issue order, so every rank issues the
//    same sequence of library groups.
#pragma once

#include <dlfcn.h>
#include <torch_fl/collective.h>
#include <torch_fl/kit/collective_library.h>
#include <torch_fl/kit/nccl_style_values.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace torch_fl::kit::nccl_style {

using SdkComm = void*;
struct UniqueId {
  char internal[kUniqueIdBytes];
};

// The functions used, with NCCL's shapes (enums pass as int).
struct Api {
  int (*GetUniqueId)(UniqueId*);
  int (*CommInitRank)(SdkComm*, int, UniqueId, int);
  int (*CommDestroy)(SdkComm);
  int (*CommAbort)(SdkComm);
  int (*CommGetAsyncError)(SdkComm, int*);
  const char* (*GetErrorString)(int);
  const char* (*GetLastError)(SdkComm);  // optional (NCCL >= 2.13)
  int (*AllReduce)(const void*, void*, size_t, int, int, SdkComm, void*);
  int (*Broadcast)(const void*, void*, size_t, int, int, SdkComm, void*);
  int (*Reduce)(const void*, void*, size_t, int, int, int, SdkComm, void*);
  int (*AllGather)(const void*, void*, size_t, int, SdkComm, void*);
  int (*ReduceScatter)(const void*, void*, size_t, int, int, SdkComm, void*);
  int (*Send)(const void*, size_t, int, int, SdkComm, void*);
  int (*Recv)(void*, size_t, int, int, SdkComm, void*);
  int (*GroupStart)();
  int (*GroupEnd)();
};

// Operation kinds a group without mixing keeps apart.
enum class Kind { all_reduce, broadcast, reduce, all_gather, reduce_scatter, point_to_point };

template <class D>
class Library {
 public:
  static const tfl_collective_v1* get(uint32_t abi_version) {
    static const tfl_collective_v1 table = {
        /*abi_version=*/TFL_COLLECTIVE_ABI_VERSION,
        /*struct_size=*/sizeof(tfl_collective_v1),
        /*name=*/D::kTable,
        /*status_name=*/[](tfl_status s) { return status_name(s); },
        /*last_error=*/[] { return last_error(); },
        /*unique_id=*/unique_id,
        /*comm_init=*/comm_init,
        /*comm_split=*/nullptr,  // core makes sub-groups from fresh ids
        /*comm_destroy=*/comm_destroy,
        /*comm_abort=*/comm_abort,
        /*comm_async_error=*/comm_async_error,
        /*comm_info=*/comm_info,
        /*all_reduce=*/all_reduce,
        /*broadcast=*/broadcast,
        /*reduce=*/reduce,
        /*all_gather=*/all_gather,
        /*reduce_scatter=*/reduce_scatter,
        /*all_to_all=*/all_to_all,
        /*send=*/send,
        /*recv=*/recv,
        /*group_start=*/group_start,
        /*group_end=*/group_end,
        /*attach_runtime=*/
        [](const tfl_runtime_v1* rt) { return state().runtime.attach(rt, D::kLibrary); },
    };
    return abi_version == TFL_COLLECTIVE_ABI_VERSION ? &table : nullptr;
  }

 private:
  using Comm = CommRecord<SdkComm>;
  using Call = std::function<int(void* stream)>;

  struct State {
    std::once_flag once;
    Api api{};
    std::string load_error;  // why the library is not usable here ("" when it is)
    AttachedRuntime runtime;
  };
  static State& state() {
    static State s;
    return s;
  }
  static const Api& api() { return state().api; }

  // A group kept by this thread (dialects without mixed groups), and how deep
  // the library's own group is on this thread.
  struct Pending {
    Kind kind;
    const char* fn;
    Comm* comm;
    void* stream;
    Call call;
  };
  struct Group {
    int depth = 0;
    int sdk_depth = 0;
    std::vector<Pending> ops;
  };
  static Group& group() {
    static thread_local Group g;
    return g;
  }

  __attribute__((format(printf, 2, 3))) static tfl_status fail_f(tfl_status status,
                                                                 const char* format, ...) {
    char buffer[1024];
    va_list args;
    va_start(args, format);
    std::vsnprintf(buffer, sizeof(buffer), format, args);
    va_end(args);
    return fail(status, buffer);
  }

  static void load() {
    State& s = state();
    void* lib = dlopen(D::kSoname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
    if (lib == nullptr) lib = dlopen(D::kSoname, RTLD_NOW | RTLD_GLOBAL);
    if (lib == nullptr) {
      const char* why = dlerror();
      s.load_error =
          std::string(D::kSoname) + " cannot be loaded (" + (why ? why : "?") + "); " + D::kMissing;
      return;
    }
    std::string missing;
    auto get = [&](const char* name, bool required) -> void* {
      const std::string symbol = std::string(D::kPrefix) + name;
      void* f = dlsym(lib, symbol.c_str());
      if (f == nullptr && required) missing += " " + symbol;
      return f;
    };
#define TFL_NCCL_STYLE_SYMBOL(field, required) \
  s.api.field = reinterpret_cast<decltype(s.api.field)>(get(#field, required))
    TFL_NCCL_STYLE_SYMBOL(GetUniqueId, true);
    TFL_NCCL_STYLE_SYMBOL(CommInitRank, true);
    TFL_NCCL_STYLE_SYMBOL(CommDestroy, true);
    TFL_NCCL_STYLE_SYMBOL(CommAbort, true);
    TFL_NCCL_STYLE_SYMBOL(CommGetAsyncError, true);
    TFL_NCCL_STYLE_SYMBOL(GetErrorString, true);
    TFL_NCCL_STYLE_SYMBOL(GetLastError, false);
    TFL_NCCL_STYLE_SYMBOL(AllReduce, true);
    TFL_NCCL_STYLE_SYMBOL(Broadcast, true);
    TFL_NCCL_STYLE_SYMBOL(Reduce, true);
    TFL_NCCL_STYLE_SYMBOL(AllGather, true);
    TFL_NCCL_STYLE_SYMBOL(ReduceScatter, true);
    TFL_NCCL_STYLE_SYMBOL(Send, true);
    TFL_NCCL_STYLE_SYMBOL(Recv, true);
    TFL_NCCL_STYLE_SYMBOL(GroupStart, true);
    TFL_NCCL_STYLE_SYMBOL(GroupEnd, true);
#undef TFL_NCCL_STYLE_SYMBOL
    if (!missing.empty()) s.load_error = std::string(D::kSoname) + " lacks" + missing;
  }

  // Every call's prologue: the library loaded, the runtime attached.
  static tfl_status ready(const char* fn) {
    State& s = state();
    std::call_once(s.once, load);
    if (!s.load_error.empty()) {
      return fail_f(TFL_ERROR_NOT_SUPPORTED, "%s: %s", fn, s.load_error.c_str());
    }
    return s.runtime.require(fn);
  }

  static tfl_status status_of(int r) {
    switch (r) {
      case kSuccess:
        return TFL_OK;
      case kInvalidArgument:
      case kInvalidUsage:
        return TFL_ERROR_INVALID_VALUE;
      case kRemoteError:
        return TFL_ERROR_ABORTED;
      default:
        return TFL_ERROR_DEVICE;
    }
  }

  // A failed library call: the status, and the library's own words in last_error().
  static tfl_status sdk_fail(int r, const char* fn, const Comm* c) {
    const char* detail = c && c->sdk && api().GetLastError ? api().GetLastError(c->sdk) : "";
    return fail_f(status_of(r), "%s: %s: %s error %d (%s)%s%s", fn,
                  c ? c->who().c_str() : D::kLibrary, D::kLibrary, r, api().GetErrorString(r),
                  detail && *detail ? ": " : "", detail ? detail : "");
  }

  static tfl_status usable(const char* fn, tfl_comm handle, Comm** out) {
    if (tfl_status st = ready(fn); st != TFL_OK) return st;
    if (tfl_status st = comm_record(fn, handle, out); st != TFL_OK) return st;
    return (*out)->usable(fn);
  }

  // The library's type and reduction of a reduction's tfl pair.
  static tfl_status reduction(const char* fn, int dtype, int op, int* type, int* sdk_op) {
    static const int kTypes[TFL_DTYPE_COUNT] = {kFloat16, kBfloat16, kFloat32, kFloat64, kInt8,
                                                kUint8,   kInt32,    kInt64,   kUint8};
    static const char* kNames[TFL_DTYPE_COUNT] = {
        "float16", "bfloat16", "float32", "float64", "int8", "uint8", "int32", "int64", "bool"};
    if (dtype < 0 || dtype >= TFL_DTYPE_COUNT) {
      return fail_f(TFL_ERROR_INVALID_VALUE, "%s: unknown dtype %d", fn, dtype);
    }
    static const int kOps[TFL_REDUCE_OP_COUNT] = {kSum, kProd, kMin, kMax, kAvg};
    if (op < 0 || op >= TFL_REDUCE_OP_COUNT) {
      return fail_f(TFL_ERROR_INVALID_VALUE, "%s: unknown reduction %d", fn, op);
    }
    *type = kTypes[dtype];
    *sdk_op = kOps[op];
    if (dtype == TFL_DTYPE_BOOL) {
      if (op == TFL_REDUCE_AVG) {
        return fail_f(TFL_ERROR_NOT_SUPPORTED, "%s: AVG is not defined for bool", fn);
      }
      *sdk_op = bool_reduces_as_max(op) ? kMax : kMin;
    }
    const bool floating = dtype == TFL_DTYPE_F16 || dtype == TFL_DTYPE_BF16 ||
                          dtype == TFL_DTYPE_F32 || dtype == TFL_DTYPE_F64;
    if (op == TFL_REDUCE_AVG && !floating) {
      return fail_f(TFL_ERROR_NOT_SUPPORTED, "%s: %s's AVG is for floating types only", fn,
                    D::kLibrary);
    }
    if (!D::kReduces64Bit && (dtype == TFL_DTYPE_I64 || dtype == TFL_DTYPE_F64)) {
      return fail_f(TFL_ERROR_NOT_SUPPORTED,
                    "%s: %s reduces no 64-bit type (%s); it moves them in broadcast and "
                    "all-gather only",
                    fn, D::kLibrary, kNames[dtype]);
    }
    return TFL_OK;
  }

  // Checks a call, finds its SDK stream, and runs it now or keeps it for group_end.
  static tfl_status issue(const char* fn, tfl_comm handle, tfl_stream stream, Kind kind,
                          const std::function<int(Comm*, void*)>& body) {
    Comm* c = nullptr;
    if (tfl_status st = usable(fn, handle, &c); st != TFL_OK) return st;
    void* sdk_stream = nullptr;
    if (tfl_status st = state().runtime.sdk_stream(fn, stream, c->device, &sdk_stream, c->who());
        st != TFL_OK) {
      return st;
    }
    if (!D::kMixedGroups && group().depth > 0) {
      group().ops.push_back({kind, fn, c, sdk_stream, [c, body](void* s) { return body(c, s); }});
      return TFL_OK;
    }
    const int r = body(c, sdk_stream);
    return r == kSuccess ? TFL_OK : sdk_fail(r, fn, c);
  }

  // A copy of `count` elements of `dtype`, as bytes.
  static tfl_status bytes_of(const char* fn, int dtype, size_t count, size_t* bytes) {
    const size_t size = dtype_bytes(dtype);
    if (size == 0) return fail_f(TFL_ERROR_INVALID_VALUE, "%s: unknown dtype %d", fn, dtype);
    *bytes = count * size;
    return TFL_OK;
  }

  // ---- the table ----------------------------------------------------------
  static tfl_status unique_id(tfl_comm_id* id) {
    if (tfl_status st = ready("tfl_unique_id"); st != TFL_OK) return st;
    if (id == nullptr) return fail(TFL_ERROR_INVALID_VALUE, "tfl_unique_id: id is NULL");
    UniqueId uid;
    const int r = api().GetUniqueId(&uid);
    if (r != kSuccess) return sdk_fail(r, "tfl_unique_id", nullptr);
    static_assert(sizeof(uid.internal) <= TFL_COMM_ID_SIZE, "the unique id fits tfl_comm_id");
    std::memset(id->bytes, 0, sizeof(id->bytes));
    std::memcpy(id->bytes, uid.internal, sizeof(uid.internal));
    return TFL_OK;
  }

  static tfl_status comm_init(tfl_comm* out, int nranks, const tfl_comm_id* id, int rank,
                              int device, uint32_t /*timeout_ms: the blocking init has none*/) {
    if (tfl_status st = ready("tfl_comm_init"); st != TFL_OK) return st;
    if (tfl_status bad = check_comm_init(out, nranks, id, rank); bad != TFL_OK) return bad;
    UniqueId uid;
    std::memcpy(uid.internal, id->bytes, sizeof(uid.internal));
    auto* c = new_record<Comm>(D::kLibrary, rank, nranks, device);
    // CommInitRank makes the communicator on the current device.
    const tfl_status st = state().runtime.on_device("tfl_comm_init", device, [&] {
      const int r = api().CommInitRank(&c->sdk, nranks, uid, rank);
      return r == kSuccess ? TFL_OK : sdk_fail(r, "tfl_comm_init", c);
    });
    if (st != TFL_OK) {
      delete c;
      return st;
    }
    *out = reinterpret_cast<tfl_comm>(c);
    return TFL_OK;
  }

  static tfl_status comm_destroy(tfl_comm handle) {
    if (tfl_status st = ready("tfl_comm_destroy"); st != TFL_OK) return st;
    if (handle == nullptr) return fail(TFL_ERROR_INVALID_HANDLE, "tfl_comm_destroy: NULL");
    Comm* c = reinterpret_cast<Comm*>(handle);
    // An aborted communicator was already released by CommAbort.
    const int r = c->aborted.load() ? kSuccess : api().CommDestroy(c->sdk);
    const tfl_status st = r == kSuccess ? TFL_OK : sdk_fail(r, "tfl_comm_destroy", c);
    delete c;
    return st;
  }

  static tfl_status comm_abort(tfl_comm handle) {
    if (tfl_status st = ready("tfl_comm_abort"); st != TFL_OK) return st;
    if (handle == nullptr) return fail(TFL_ERROR_INVALID_HANDLE, "tfl_comm_abort: NULL");
    Comm* c = reinterpret_cast<Comm*>(handle);
    if (c->aborted.exchange(true)) return TFL_OK;
    const int r = api().CommAbort(c->sdk);
    return r == kSuccess ? TFL_OK : sdk_fail(r, "tfl_comm_abort", c);
  }

  static tfl_status comm_async_error(tfl_comm handle, tfl_status* error) {
    if (tfl_status st = ready("tfl_comm_async_error"); st != TFL_OK) return st;
    Comm* c = nullptr;
    if (tfl_status st = comm_record("tfl_comm_async_error", handle, &c); st != TFL_OK) return st;
    if (error == nullptr) {
      return fail(TFL_ERROR_INVALID_VALUE, "tfl_comm_async_error: error is NULL");
    }
    if (!c->aborted.load() && c->first_error.load() == TFL_OK) {
      int async = kSuccess;
      const int r = api().CommGetAsyncError(c->sdk, &async);
      if (r != kSuccess) return sdk_fail(r, "tfl_comm_async_error", c);
      if (async != kSuccess && async != kInProgress) {
        c->keep_first_failure(sdk_fail(async, "an enqueued operation", c));
      }
    }
    return c->answer_async_error(error);
  }

  static tfl_status comm_info(tfl_comm handle, int* rank, int* nranks, int* device) {
    Comm* c = nullptr;
    if (tfl_status st = comm_record("tfl_comm_info", handle, &c); st != TFL_OK) return st;
    return c->info(rank, nranks, device);
  }

  static tfl_status all_reduce(const void* send, void* recv, size_t count, int dtype, int op,
                               tfl_comm comm, tfl_stream stream) {
    int t = 0, o = 0;
    if (tfl_status st = reduction("tfl_all_reduce", dtype, op, &t, &o); st != TFL_OK) return st;
    return issue("tfl_all_reduce", comm, stream, Kind::all_reduce, [=](Comm* c, void* s) {
      return api().AllReduce(send, recv, count, t, o, c->sdk, s);
    });
  }

  static tfl_status reduce(const void* send, void* recv, size_t count, int dtype, int op, int root,
                           tfl_comm comm, tfl_stream stream) {
    int t = 0, o = 0;
    if (tfl_status st = reduction("tfl_reduce", dtype, op, &t, &o); st != TFL_OK) return st;
    return issue("tfl_reduce", comm, stream, Kind::reduce, [=](Comm* c, void* s) {
      return api().Reduce(send, recv, count, t, o, root, c->sdk, s);
    });
  }

  static tfl_status reduce_scatter(const void* send, void* recv, size_t count, int dtype, int op,
                                   tfl_comm comm, tfl_stream stream) {
    int t = 0, o = 0;
    if (tfl_status st = reduction("tfl_reduce_scatter", dtype, op, &t, &o); st != TFL_OK) {
      return st;
    }
    return issue("tfl_reduce_scatter", comm, stream, Kind::reduce_scatter, [=](Comm* c, void* s) {
      return api().ReduceScatter(send, recv, count, t, o, c->sdk, s);
    });
  }

  static tfl_status broadcast(const void* send, void* recv, size_t count, int dtype, int root,
                              tfl_comm comm, tfl_stream stream) {
    size_t n = 0;
    if (tfl_status st = bytes_of("tfl_broadcast", dtype, count, &n); st != TFL_OK) return st;
    return issue("tfl_broadcast", comm, stream, Kind::broadcast, [=](Comm* c, void* s) {
      return api().Broadcast(send, recv, n, kUint8, root, c->sdk, s);
    });
  }

  static tfl_status all_gather(const void* send, void* recv, size_t count, int dtype, tfl_comm comm,
                               tfl_stream stream) {
    size_t n = 0;
    if (tfl_status st = bytes_of("tfl_all_gather", dtype, count, &n); st != TFL_OK) return st;
    return issue("tfl_all_gather", comm, stream, Kind::all_gather, [=](Comm* c, void* s) {
      return api().AllGather(send, recv, n, kUint8, c->sdk, s);
    });
  }

  static tfl_status all_to_all(const void* send, void* recv, size_t count, int dtype, tfl_comm comm,
                               tfl_stream stream) {
    size_t n = 0;
    if (tfl_status st = bytes_of("tfl_all_to_all", dtype, count, &n); st != TFL_OK) return st;
    return issue("tfl_all_to_all", comm, stream, Kind::point_to_point, [=](Comm* c, void* s) {
      // In a library group already (group_end's, or the caller's on a mixing library), the
      // sends and receives join it; otherwise they are one group of their own.
      const bool own = group().sdk_depth == 0;
      int r = own ? api().GroupStart() : kSuccess;
      for (int p = 0; p < c->nranks && r == kSuccess; ++p) {
        r = api().Send(static_cast<const char*>(send) + p * n, n, kUint8, p, c->sdk, s);
        if (r == kSuccess)
          r = api().Recv(static_cast<char*>(recv) + p * n, n, kUint8, p, c->sdk, s);
      }
      const int end = own ? api().GroupEnd() : kSuccess;
      return r != kSuccess ? r : end;
    });
  }

  static tfl_status send(const void* buf, size_t count, int dtype, int peer, tfl_comm comm,
                         tfl_stream stream) {
    size_t n = 0;
    if (tfl_status st = bytes_of("tfl_send", dtype, count, &n); st != TFL_OK) return st;
    return issue("tfl_send", comm, stream, Kind::point_to_point,
                 [=](Comm* c, void* s) { return api().Send(buf, n, kUint8, peer, c->sdk, s); });
  }

  static tfl_status recv(void* buf, size_t count, int dtype, int peer, tfl_comm comm,
                         tfl_stream stream) {
    size_t n = 0;
    if (tfl_status st = bytes_of("tfl_recv", dtype, count, &n); st != TFL_OK) return st;
    return issue("tfl_recv", comm, stream, Kind::point_to_point,
                 [=](Comm* c, void* s) { return api().Recv(buf, n, kUint8, peer, c->sdk, s); });
  }

  static tfl_status group_start() {
    if (tfl_status st = ready("tfl_group_start"); st != TFL_OK) return st;
    Group& g = group();
    if (!D::kMixedGroups) {
      ++g.depth;
      return TFL_OK;
    }
    const int r = api().GroupStart();
    if (r != kSuccess) return sdk_fail(r, "tfl_group_start", nullptr);
    ++g.sdk_depth;
    return TFL_OK;
  }

  static tfl_status group_end() {
    if (tfl_status st = ready("tfl_group_end"); st != TFL_OK) return st;
    Group& g = group();
    if (D::kMixedGroups) {
      if (g.sdk_depth == 0) {
        return fail(TFL_ERROR_INVALID_VALUE, "tfl_group_end: no group_start on this thread");
      }
      --g.sdk_depth;
      const int r = api().GroupEnd();
      return r == kSuccess ? TFL_OK : sdk_fail(r, "tfl_group_end", nullptr);
    }
    if (g.depth == 0) {
      return fail(TFL_ERROR_INVALID_VALUE, "tfl_group_end: no group_start on this thread");
    }
    if (--g.depth > 0) return TFL_OK;
    std::vector<Pending> ops;
    ops.swap(g.ops);
    // One library group per run of one kind, in issue order.
    for (size_t i = 0; i < ops.size();) {
      size_t j = i;
      int r = api().GroupStart();
      if (r != kSuccess) return sdk_fail(r, "tfl_group_end (group start)", ops[i].comm);
      ++g.sdk_depth;
      for (; j < ops.size() && ops[j].kind == ops[i].kind && r == kSuccess; ++j) {
        r = ops[j].call(ops[j].stream);
        if (r != kSuccess) {
          --g.sdk_depth;
          api().GroupEnd();
          return sdk_fail(r, ops[j].fn, ops[j].comm);
        }
      }
      --g.sdk_depth;
      r = api().GroupEnd();
      if (r != kSuccess) return sdk_fail(r, "tfl_group_end", ops[i].comm);
      i = j;
    }
    return TFL_OK;
  }
};

}  // namespace torch_fl::kit::nccl_style

// The library's one export: tfl_collective_get over the dialect's Library.
#define TFL_NCCL_STYLE_COLLECTIVE(Dialect)                                                       \
  extern "C" __attribute__((visibility("default"))) const tfl_collective_v1* tfl_collective_get( \
      uint32_t abi_version) {                                                                    \
    return ::torch_fl::kit::nccl_style::Library<Dialect>::get(abi_version);                      \
  }
