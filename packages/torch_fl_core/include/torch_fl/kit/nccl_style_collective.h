// The dialect of NCCL and the libraries made in its image (Enflame's ECCL, Moore Threads'
// MCCL, ...) for the kit's collective library (sdk_collective.h): functions with NCCL's shapes
// and names after a prefix, NCCL's enum values for results, element types and reductions. The
// SDK library is loaded at first use (dlopen by soname, each function by prefix + NCCL's name),
// so the collective library builds without the SDK's headers and loads where the SDK is
// missing: every call then says why it cannot run.
//
// A vendor's library is what its library differs in, and one line:
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
#pragma once

#include <dlfcn.h>
#include <torch_fl/kit/nccl_style_values.h>
#include <torch_fl/kit/sdk_collective.h>

#include <string>

namespace torch_fl::kit::nccl_style {

struct UniqueId {
  char internal[kUniqueIdBytes];
};

// The functions used, with NCCL's shapes (enums pass as int).
struct Api {
  int (*GetUniqueId)(UniqueId*);
  int (*CommInitRank)(void**, int, UniqueId, int);
  int (*CommDestroy)(void*);
  int (*CommAbort)(void*);
  int (*CommGetAsyncError)(void*, int*);
  const char* (*GetErrorString)(int);
  const char* (*GetLastError)(void*);  // optional (NCCL >= 2.13)
  int (*AllReduce)(const void*, void*, size_t, int, int, void*, void*);
  int (*Broadcast)(const void*, void*, size_t, int, int, void*, void*);
  int (*Reduce)(const void*, void*, size_t, int, int, int, void*, void*);
  int (*AllGather)(const void*, void*, size_t, int, void*, void*);
  int (*ReduceScatter)(const void*, void*, size_t, int, int, void*, void*);
  int (*Send)(const void*, size_t, int, int, void*, void*);
  int (*Recv)(void*, size_t, int, int, void*, void*);
  int (*GroupStart)();
  int (*GroupEnd)();
};

// The dialect SdkCollective reads, from what the vendor's struct `V` says.
template <class V>
struct Dialect {
  using Comm = void*;
  static constexpr const char* kLibrary = V::kLibrary;
  static constexpr const char* kTable = V::kTable;
  static constexpr size_t kIdBytes = kUniqueIdBytes;
  static constexpr GroupMode kGroups = V::kMixedGroups ? GroupMode::mixed : GroupMode::per_kind;
  static constexpr bool kBroadcastInPlace = false;
  static constexpr bool kAllToAll = false;  // sends and receives in a group
  static constexpr int kSuccess = nccl_style::kSuccess;
  static constexpr int kInProgress = nccl_style::kInProgress;
  static constexpr int kByte = kUint8;

  static int type(int dtype) {
    static const int kTypes[TFL_DTYPE_COUNT] = {kFloat16, kBfloat16, kFloat32, kFloat64, kInt8,
                                                kUint8,   kInt32,    kInt64,   kUint8};
    return kTypes[dtype];
  }
  static int op(int reduce_op) {
    static const int kOps[TFL_REDUCE_OP_COUNT] = {kSum, kProd, kMin, kMax, kAvg};
    return kOps[reduce_op];
  }
  static const char* cannot_reduce(int dtype, int) {
    if (V::kReduces64Bit || (dtype != TFL_DTYPE_I64 && dtype != TFL_DTYPE_F64)) return nullptr;
    static const std::string i64 = std::string(V::kLibrary) +
                                   " reduces no 64-bit type (int64); it moves them in broadcast "
                                   "and all-gather only";
    static const std::string f64 = std::string(V::kLibrary) +
                                   " reduces no 64-bit type (float64); it moves them in broadcast "
                                   "and all-gather only";
    return (dtype == TFL_DTYPE_I64 ? i64 : f64).c_str();
  }
  static tfl_status status_of(int r) {
    switch (r) {
      case nccl_style::kSuccess:
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

  static Api& api() {
    static Api a{};
    return a;
  }
  static std::string load() {
    void* lib = dlopen(V::kSoname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
    if (lib == nullptr) lib = dlopen(V::kSoname, RTLD_NOW | RTLD_GLOBAL);
    if (lib == nullptr) {
      const char* why = dlerror();
      return std::string(V::kSoname) + " cannot be loaded (" + (why ? why : "?") + "); " +
             V::kMissing;
    }
    std::string missing;
    auto get = [&](const char* name, bool required) -> void* {
      const std::string symbol = std::string(V::kPrefix) + name;
      void* f = dlsym(lib, symbol.c_str());
      if (f == nullptr && required) missing += " " + symbol;
      return f;
    };
    Api& a = api();
#define TFL_NCCL_STYLE_SYMBOL(field, required) \
  a.field = reinterpret_cast<decltype(a.field)>(get(#field, required))
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
    return missing.empty() ? "" : std::string(V::kSoname) + " lacks" + missing;
  }

  static const char* error_string(int r) { return api().GetErrorString(r); }
  static const char* last_error(Comm c) {
    return c && api().GetLastError ? api().GetLastError(c) : "";
  }
  static int unique_id(void* id) {
    UniqueId uid;
    const int r = api().GetUniqueId(&uid);
    if (r == kSuccess) std::memcpy(id, uid.internal, sizeof(uid.internal));
    return r;
  }
  static int comm_init(Comm* c, int nranks, const void* id, int rank) {
    UniqueId uid;
    std::memcpy(uid.internal, id, sizeof(uid.internal));
    return api().CommInitRank(c, nranks, uid, rank);
  }
  static int comm_destroy(Comm c) { return api().CommDestroy(c); }
  static int comm_abort(Comm c) { return api().CommAbort(c); }
  static int async_error(Comm c, int* e) { return api().CommGetAsyncError(c, e); }
  static int all_reduce(const void* s, void* r, size_t n, int t, int o, Comm c, void* st) {
    return api().AllReduce(s, r, n, t, o, c, st);
  }
  static int broadcast(const void* s, void* r, size_t n, int t, int root, Comm c, void* st) {
    return api().Broadcast(s, r, n, t, root, c, st);
  }
  static int reduce(const void* s, void* r, size_t n, int t, int o, int root, Comm c, void* st) {
    return api().Reduce(s, r, n, t, o, root, c, st);
  }
  static int all_gather(const void* s, void* r, size_t n, int t, Comm c, void* st) {
    return api().AllGather(s, r, n, t, c, st);
  }
  static int reduce_scatter(const void* s, void* r, size_t n, int t, int o, Comm c, void* st) {
    return api().ReduceScatter(s, r, n, t, o, c, st);
  }
  static int send(const void* b, size_t n, int t, int peer, Comm c, void* st) {
    return api().Send(b, n, t, peer, c, st);
  }
  static int recv(void* b, size_t n, int t, int peer, Comm c, void* st) {
    return api().Recv(b, n, t, peer, c, st);
  }
  static int group_start() { return api().GroupStart(); }
  static int group_end() { return api().GroupEnd(); }
};

}  // namespace torch_fl::kit::nccl_style

// The library's one export, over the vendor's NCCL-style dialect.
#define TFL_NCCL_STYLE_COLLECTIVE(Vendor) \
  TFL_SDK_COLLECTIVE(::torch_fl::kit::nccl_style::Dialect<Vendor>)
