// A vendor's whole collective library (collective.h) over its SDK's collective calls, whatever
// their dialect: NCCL and the libraries made in its image (nccl_style_collective.h gives their
// dialect once), Huawei's HCCL, ... A vendor writes its dialect, the SDK's calls with NCCL's
// shapes plus the SDK's values, and one line:
//
//   struct Hccl {
//     using Comm = HcclComm;
//     static constexpr const char* kLibrary = "HCCL";   // in messages
//     static constexpr const char* kTable = "hccl";     // tfl_collective_v1.name
//     static constexpr size_t kIdBytes = ...;           // the SDK's unique id, in tfl_comm_id
//     static constexpr GroupMode kGroups = GroupMode::batched_p2p;
//     static constexpr bool kBroadcastInPlace = true;   // the root sends from its recv buffer
//     static constexpr bool kAllToAll = true;           // it has all_to_all (below)
//     // values: success, "in progress" (-1: none), the byte type, a tfl dtype's and reduction's
//     // SDK value (-1: none), what it cannot reduce, its results as tfl statuses
//     static constexpr int kSuccess = 0, kInProgress = -1, kByte = ...;
//     static int type(int dtype); static int op(int reduce_op);
//     static const char* cannot_reduce(int dtype, int reduce_op);  // nullptr: it can
//     static tfl_status status_of(int result);
//     // the SDK: load() says why it is unusable ("" when it is); the calls return its result
//     static std::string load(); static const char* error_string(int);
//     static const char* last_error(Comm);  // its words on the last failure ("" if none)
//     static int unique_id(void* id); static int comm_init(Comm*, int nranks, const void* id,
//     int rank); comm_destroy, comm_abort (may release like destroy), async_error(Comm, int*),
//     all_reduce, broadcast, reduce, all_gather, reduce_scatter, send, recv (NCCL's shapes),
//     and group_start/group_end (library groups) or send_recv(const P2p*, size_t, Comm, stream)
//     (batched_p2p).
//   };
//   TFL_SDK_COLLECTIVE(Hccl)
//
// What the mapping decides for every dialect:
//  - broadcast, all_gather, all_to_all, send and recv move bytes (kByte, count * element size):
//    they copy, so any element type travels, also on a library that moves only some types;
//  - reductions map the type; bool is one byte reduced with MAX ("or") or MIN ("and"); AVG is
//    for floating types; what the dialect cannot reduce is TFL_ERROR_NOT_SUPPORTED before
//    anything is queued (core then sums and divides, or gathers and reduces on the device);
//  - all_to_all is the library's own where it has one (kAllToAll, all_to_all(send, recv, count,
//    type, comm, stream)), else one send and one receive per rank, as one group or one batch;
//  - groups (GroupMode): `mixed` passes them to the library; `per_kind` keeps them per thread and
//    issues at the outermost group_end one library group per run of operations of one kind
//    (sends, receives and all-to-alls are one kind), in issue order, so every rank issues the
//    same sequence; `batched_p2p` (a library without groups) does the same with each run's
//    sends and receives on one communicator and stream as one send_recv batch.
#pragma once

#include <torch_fl/collective.h>
#include <torch_fl/kit/collective_library.h>

#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace torch_fl::kit {

enum class GroupMode { mixed, per_kind, batched_p2p };

// One send or receive of a group or batch, in bytes.
struct P2p {
  bool send;
  void* buf;
  size_t bytes;
  int peer;
};

template <class D>
class SdkCollective {
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
  using Comm = CommRecord<typename D::Comm>;
  using Call = std::function<int(void* stream)>;
  static constexpr bool kLibraryGroups = D::kGroups != GroupMode::batched_p2p;
  static constexpr int kNoRank = INT_MIN;

  // Operation kinds a group keeps apart (all but `mixed`).
  enum class Kind {
    all_reduce,
    broadcast,
    reduce,
    all_gather,
    reduce_scatter,
    all_to_all,
    point_to_point
  };

  struct State {
    std::once_flag once;
    std::string load_error;  // why the library is not usable here ("" when it is)
    AttachedRuntime runtime;
  };
  static State& state() {
    static State s;
    return s;
  }

  // A group kept by this thread, and how deep the library's own group is on this thread.
  struct Pending {
    Kind kind;
    const char* fn;
    Comm* comm;
    void* stream;
    Call call;             // a collective
    std::vector<P2p> p2p;  // or sends and receives
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

  // Every call's prologue: the library loaded, the runtime attached.
  static tfl_status ready(const char* fn) {
    State& s = state();
    std::call_once(s.once, [&s] { s.load_error = D::load(); });
    if (!s.load_error.empty()) {
      return fail_f(TFL_ERROR_NOT_SUPPORTED, "%s: %s", fn, s.load_error.c_str());
    }
    return s.runtime.require(fn);
  }

  // A failed library call: the status, and the library's own words in last_error().
  static tfl_status sdk_fail(int r, const char* fn, const Comm* c) {
    const char* detail = D::last_error(c ? c->sdk : typename D::Comm{});
    return fail_f(D::status_of(r), "%s: %s: %s error %d (%s)%s%s", fn,
                  c ? c->who().c_str() : D::kLibrary, D::kLibrary, r, D::error_string(r),
                  detail && *detail ? ": " : "", detail ? detail : "");
  }

  static tfl_status usable(const char* fn, tfl_comm handle, Comm** out) {
    if (tfl_status st = ready(fn); st != TFL_OK) return st;
    if (tfl_status st = comm_record(fn, handle, out); st != TFL_OK) return st;
    return (*out)->usable(fn);
  }

  // The library's type and reduction of a reduction's tfl pair.
  static tfl_status reduction(const char* fn, int dtype, int op, int* type, int* sdk_op) {
    if (dtype < 0 || dtype >= TFL_DTYPE_COUNT) {
      return fail_f(TFL_ERROR_INVALID_VALUE, "%s: unknown dtype %d", fn, dtype);
    }
    if (op < 0 || op >= TFL_REDUCE_OP_COUNT) {
      return fail_f(TFL_ERROR_INVALID_VALUE, "%s: unknown reduction %d", fn, op);
    }
    static const char* kOpNames[TFL_REDUCE_OP_COUNT] = {"SUM", "PROD", "MIN", "MAX", "AVG"};
    if (dtype == TFL_DTYPE_BOOL) {
      if (op == TFL_REDUCE_AVG) {
        return fail_f(TFL_ERROR_NOT_SUPPORTED, "%s: AVG is not defined for bool", fn);
      }
      op = bool_reduces_as_max(op) ? TFL_REDUCE_MAX : TFL_REDUCE_MIN;
    }
    *type = D::type(dtype);
    *sdk_op = D::op(op);
    if (*sdk_op < 0) {
      return fail_f(TFL_ERROR_NOT_SUPPORTED, "%s: %s has no %s reduction", fn, D::kLibrary,
                    kOpNames[op]);
    }
    const bool floating = dtype == TFL_DTYPE_F16 || dtype == TFL_DTYPE_BF16 ||
                          dtype == TFL_DTYPE_F32 || dtype == TFL_DTYPE_F64;
    if (op == TFL_REDUCE_AVG && !floating) {
      return fail_f(TFL_ERROR_NOT_SUPPORTED, "%s: %s's AVG is for floating types only", fn,
                    D::kLibrary);
    }
    if (const char* why = D::cannot_reduce(dtype, op)) {
      return fail_f(TFL_ERROR_NOT_SUPPORTED, "%s: %s", fn, why);
    }
    return TFL_OK;
  }

  // Checks a call and finds its SDK stream: the communicator and stream, or the failure.
  static tfl_status prepare(const char* fn, tfl_comm handle, tfl_stream stream, int rank, Comm** c,
                            void** sdk_stream) {
    if (tfl_status st = usable(fn, handle, c); st != TFL_OK) return st;
    if (rank != kNoRank && (rank < 0 || rank >= (*c)->nranks)) {
      return fail_f(TFL_ERROR_INVALID_VALUE, "%s: %s has no rank %d", fn, (*c)->who().c_str(),
                    rank);
    }
    return state().runtime.sdk_stream(fn, stream, (*c)->device, sdk_stream, (*c)->who());
  }

  static bool keeps_groups() { return D::kGroups != GroupMode::mixed && group().depth > 0; }

  // A collective: run now, or kept for group_end.
  // `rank`: the root or peer it names (kNoRank: none).
  static tfl_status issue(const char* fn, tfl_comm handle, tfl_stream stream, Kind kind, int rank,
                          const std::function<int(Comm*, void*)>& body) {
    Comm* c = nullptr;
    void* s = nullptr;
    if (tfl_status st = prepare(fn, handle, stream, rank, &c, &s); st != TFL_OK) return st;
    if (keeps_groups()) {
      group().ops.push_back({kind, fn, c, s, [c, body](void* st) { return body(c, st); }, {}});
      return TFL_OK;
    }
    const int r = body(c, s);
    return r == D::kSuccess ? TFL_OK : sdk_fail(r, fn, c);
  }

  // Sends and receives: run now, or kept for group_end.
  static tfl_status issue_p2p(const char* fn, tfl_comm handle, tfl_stream stream, int peer,
                              std::vector<P2p> items) {
    Comm* c = nullptr;
    void* s = nullptr;
    if (tfl_status st = prepare(fn, handle, stream, peer, &c, &s); st != TFL_OK) return st;
    if (keeps_groups()) {
      group().ops.push_back({Kind::point_to_point, fn, c, s, nullptr, std::move(items)});
      return TFL_OK;
    }
    const int r = run_p2p(items.data(), items.size(), c, s);
    return r == D::kSuccess ? TFL_OK : sdk_fail(r, fn, c);
  }

  static int one_p2p(const P2p& p, Comm* c, void* s) {
    return p.send ? D::send(p.buf, p.bytes, D::kByte, p.peer, c->sdk, s)
                  : D::recv(p.buf, p.bytes, D::kByte, p.peer, c->sdk, s);
  }

  // `n` sends and receives on one communicator and stream: one call where n is 1, else one
  // batch, or in a library group (the caller's or group_end's, or one of their own).
  static int run_p2p(const P2p* items, size_t n, Comm* c, void* s) {
    if (n == 1) return one_p2p(items[0], c, s);
    if constexpr (!kLibraryGroups) {
      return D::send_recv(items, n, c->sdk, s);
    } else {
      const bool own = group().sdk_depth == 0;
      int r = own ? D::group_start() : D::kSuccess;
      for (size_t i = 0; i < n && r == D::kSuccess; ++i) r = one_p2p(items[i], c, s);
      const int end = own ? D::group_end() : D::kSuccess;
      return r != D::kSuccess ? r : end;
    }
  }

  // A copy of `count` elements of `dtype`, as bytes.
  static tfl_status bytes_of(const char* fn, int dtype, size_t count, size_t* bytes) {
    const size_t size = dtype_bytes(dtype);
    if (size == 0) return fail_f(TFL_ERROR_INVALID_VALUE, "%s: unknown dtype %d", fn, dtype);
    *bytes = count * size;
    return TFL_OK;
  }

  // A kept run [i, j) of one kind, issued: one library group, or (batched_p2p) the collectives
  // one by one and the sends and receives as one batch per communicator and stream.
  static tfl_status issue_run(std::vector<Pending>& ops, size_t i, size_t j) {
    Group& g = group();
    if constexpr (kLibraryGroups) {
      int r = D::group_start();
      if (r != D::kSuccess) return sdk_fail(r, "tfl_group_end (group start)", ops[i].comm);
      ++g.sdk_depth;
      for (size_t k = i; k < j; ++k) {
        Pending& p = ops[k];
        r = p.call ? p.call(p.stream) : run_p2p(p.p2p.data(), p.p2p.size(), p.comm, p.stream);
        if (r != D::kSuccess) {
          --g.sdk_depth;
          D::group_end();
          return sdk_fail(r, p.fn, p.comm);
        }
      }
      --g.sdk_depth;
      r = D::group_end();
      return r == D::kSuccess ? TFL_OK : sdk_fail(r, "tfl_group_end", ops[i].comm);
    } else {
      for (size_t k = i; k < j;) {
        Pending& p = ops[k];
        if (p.call) {
          const int r = p.call(p.stream);
          if (r != D::kSuccess) return sdk_fail(r, p.fn, p.comm);
          ++k;
          continue;
        }
        std::vector<P2p> batch;
        size_t m = k;
        for (; m < j && ops[m].comm == p.comm && ops[m].stream == p.stream; ++m) {
          batch.insert(batch.end(), ops[m].p2p.begin(), ops[m].p2p.end());
        }
        const int r = run_p2p(batch.data(), batch.size(), p.comm, p.stream);
        if (r != D::kSuccess) return sdk_fail(r, p.fn, p.comm);
        k = m;
      }
      return TFL_OK;
    }
  }

  // ---- the table ----------------------------------------------------------
  static tfl_status unique_id(tfl_comm_id* id) {
    if (tfl_status st = ready("tfl_unique_id"); st != TFL_OK) return st;
    if (id == nullptr) return fail(TFL_ERROR_INVALID_VALUE, "tfl_unique_id: id is NULL");
    static_assert(D::kIdBytes <= TFL_COMM_ID_SIZE, "the unique id fits tfl_comm_id");
    std::memset(id->bytes, 0, sizeof(id->bytes));
    const int r = D::unique_id(id->bytes);
    return r == D::kSuccess ? TFL_OK : sdk_fail(r, "tfl_unique_id", nullptr);
  }

  static tfl_status comm_init(tfl_comm* out, int nranks, const tfl_comm_id* id, int rank,
                              int device, uint32_t /*timeout_ms: the blocking init has none*/) {
    if (tfl_status st = ready("tfl_comm_init"); st != TFL_OK) return st;
    if (tfl_status bad = check_comm_init(out, nranks, id, rank); bad != TFL_OK) return bad;
    auto* c = new_record<Comm>(D::kLibrary, rank, nranks, device);
    // The SDK makes the communicator on the current device.
    const tfl_status st = state().runtime.on_device("tfl_comm_init", device, [&] {
      const int r = D::comm_init(&c->sdk, nranks, id->bytes, rank);
      return r == D::kSuccess ? TFL_OK : sdk_fail(r, "tfl_comm_init", c);
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
    // An aborted communicator was already released by the abort.
    const int r = c->aborted.load() ? D::kSuccess : D::comm_destroy(c->sdk);
    const tfl_status st = r == D::kSuccess ? TFL_OK : sdk_fail(r, "tfl_comm_destroy", c);
    delete c;
    return st;
  }

  static tfl_status comm_abort(tfl_comm handle) {
    if (tfl_status st = ready("tfl_comm_abort"); st != TFL_OK) return st;
    if (handle == nullptr) return fail(TFL_ERROR_INVALID_HANDLE, "tfl_comm_abort: NULL");
    Comm* c = reinterpret_cast<Comm*>(handle);
    if (c->aborted.exchange(true)) return TFL_OK;
    const int r = D::comm_abort(c->sdk);
    return r == D::kSuccess ? TFL_OK : sdk_fail(r, "tfl_comm_abort", c);
  }

  static tfl_status comm_async_error(tfl_comm handle, tfl_status* error) {
    if (tfl_status st = ready("tfl_comm_async_error"); st != TFL_OK) return st;
    Comm* c = nullptr;
    if (tfl_status st = comm_record("tfl_comm_async_error", handle, &c); st != TFL_OK) return st;
    if (error == nullptr) {
      return fail(TFL_ERROR_INVALID_VALUE, "tfl_comm_async_error: error is NULL");
    }
    if (!c->aborted.load() && c->first_error.load() == TFL_OK) {
      int async = D::kSuccess;
      const int r = D::async_error(c->sdk, &async);
      if (r != D::kSuccess) return sdk_fail(r, "tfl_comm_async_error", c);
      if (async != D::kSuccess && async != D::kInProgress) {
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
    return issue("tfl_all_reduce", comm, stream, Kind::all_reduce, kNoRank, [=](Comm* c, void* s) {
      return D::all_reduce(send, recv, count, t, o, c->sdk, s);
    });
  }

  static tfl_status reduce(const void* send, void* recv, size_t count, int dtype, int op, int root,
                           tfl_comm comm, tfl_stream stream) {
    int t = 0, o = 0;
    if (tfl_status st = reduction("tfl_reduce", dtype, op, &t, &o); st != TFL_OK) return st;
    return issue("tfl_reduce", comm, stream, Kind::reduce, root, [=](Comm* c, void* s) {
      return D::reduce(send, recv, count, t, o, root, c->sdk, s);
    });
  }

  static tfl_status reduce_scatter(const void* send, void* recv, size_t count, int dtype, int op,
                                   tfl_comm comm, tfl_stream stream) {
    int t = 0, o = 0;
    if (tfl_status st = reduction("tfl_reduce_scatter", dtype, op, &t, &o); st != TFL_OK) {
      return st;
    }
    return issue(
        "tfl_reduce_scatter", comm, stream, Kind::reduce_scatter, kNoRank,
        [=](Comm* c, void* s) { return D::reduce_scatter(send, recv, count, t, o, c->sdk, s); });
  }

  static tfl_status broadcast(const void* send, void* recv, size_t count, int dtype, int root,
                              tfl_comm comm, tfl_stream stream) {
    size_t n = 0;
    if (tfl_status st = bytes_of("tfl_broadcast", dtype, count, &n); st != TFL_OK) return st;
    if constexpr (D::kBroadcastInPlace) {
      Comm* c = nullptr;
      if (tfl_status st = usable("tfl_broadcast", comm, &c); st != TFL_OK) return st;
      if (c->rank == root && send != recv && n > 0) {
        return fail_f(TFL_ERROR_NOT_SUPPORTED,
                      "tfl_broadcast: %s: %s broadcasts in place (the root's send must be its "
                      "recv)",
                      c->who().c_str(), D::kLibrary);
      }
    }
    return issue("tfl_broadcast", comm, stream, Kind::broadcast, root, [=](Comm* c, void* s) {
      return D::broadcast(send, recv, n, D::kByte, root, c->sdk, s);
    });
  }

  static tfl_status all_gather(const void* send, void* recv, size_t count, int dtype, tfl_comm comm,
                               tfl_stream stream) {
    size_t n = 0;
    if (tfl_status st = bytes_of("tfl_all_gather", dtype, count, &n); st != TFL_OK) return st;
    return issue("tfl_all_gather", comm, stream, Kind::all_gather, kNoRank, [=](Comm* c, void* s) {
      return D::all_gather(send, recv, n, D::kByte, c->sdk, s);
    });
  }

  static tfl_status all_to_all(const void* send, void* recv, size_t count, int dtype, tfl_comm comm,
                               tfl_stream stream) {
    size_t n = 0;
    if (tfl_status st = bytes_of("tfl_all_to_all", dtype, count, &n); st != TFL_OK) return st;
    if constexpr (D::kAllToAll) {
      return issue(
          "tfl_all_to_all", comm, stream, Kind::all_to_all, kNoRank,
          [=](Comm* c, void* s) { return D::all_to_all(send, recv, n, D::kByte, c->sdk, s); });
    }
    Comm* c = nullptr;
    if (tfl_status st = usable("tfl_all_to_all", comm, &c); st != TFL_OK) return st;
    std::vector<P2p> items;
    for (int p = 0; p < c->nranks; ++p) {
      items.push_back({true, const_cast<char*>(static_cast<const char*>(send)) + p * n, n, p});
      items.push_back({false, static_cast<char*>(recv) + p * n, n, p});
    }
    return issue_p2p("tfl_all_to_all", comm, stream, kNoRank, std::move(items));
  }

  static tfl_status send(const void* buf, size_t count, int dtype, int peer, tfl_comm comm,
                         tfl_stream stream) {
    size_t n = 0;
    if (tfl_status st = bytes_of("tfl_send", dtype, count, &n); st != TFL_OK) return st;
    return issue_p2p("tfl_send", comm, stream, peer, {{true, const_cast<void*>(buf), n, peer}});
  }

  static tfl_status recv(void* buf, size_t count, int dtype, int peer, tfl_comm comm,
                         tfl_stream stream) {
    size_t n = 0;
    if (tfl_status st = bytes_of("tfl_recv", dtype, count, &n); st != TFL_OK) return st;
    return issue_p2p("tfl_recv", comm, stream, peer, {{false, buf, n, peer}});
  }

  static tfl_status group_start() {
    if (tfl_status st = ready("tfl_group_start"); st != TFL_OK) return st;
    Group& g = group();
    if constexpr (D::kGroups != GroupMode::mixed) {
      ++g.depth;
      return TFL_OK;
    } else {
      const int r = D::group_start();
      if (r != D::kSuccess) return sdk_fail(r, "tfl_group_start", nullptr);
      ++g.sdk_depth;
      return TFL_OK;
    }
  }

  static tfl_status group_end() {
    if (tfl_status st = ready("tfl_group_end"); st != TFL_OK) return st;
    Group& g = group();
    if constexpr (D::kGroups == GroupMode::mixed) {
      if (g.sdk_depth == 0) {
        return fail(TFL_ERROR_INVALID_VALUE, "tfl_group_end: no group_start on this thread");
      }
      --g.sdk_depth;
      const int r = D::group_end();
      return r == D::kSuccess ? TFL_OK : sdk_fail(r, "tfl_group_end", nullptr);
    } else {
      if (g.depth == 0) {
        return fail(TFL_ERROR_INVALID_VALUE, "tfl_group_end: no group_start on this thread");
      }
      if (--g.depth > 0) return TFL_OK;
      std::vector<Pending> ops;
      ops.swap(g.ops);
      // One run of one kind at a time, in issue order.
      for (size_t i = 0; i < ops.size();) {
        size_t j = i;
        while (j < ops.size() && ops[j].kind == ops[i].kind) ++j;
        if (tfl_status st = issue_run(ops, i, j); st != TFL_OK) return st;
        i = j;
      }
      return TFL_OK;
    }
  }
};

}  // namespace torch_fl::kit

// The library's one export: tfl_collective_get over the dialect's library.
#define TFL_SDK_COLLECTIVE(Dialect)                                                              \
  extern "C" __attribute__((visibility("default"))) const tfl_collective_v1* tfl_collective_get( \
      uint32_t abi_version) {                                                                    \
    return ::torch_fl::kit::SdkCollective<Dialect>::get(abi_version);                            \
  }
