// The extern "C" functions of an NCCL-style collective library over its Library (nccl_style.h),
// each counted and faulted under its SDK name. P: the library's prefix (its types P##Result_t,
// P##Comm_t, P##UniqueId, P##DataType_t, P##RedOp_t and enumerators P##Success, P##Int64, ...);
// STREAM: its runtime's stream type; RUNTIME: its nccl::Runtime; DIALECT: its nccl::Dialect.
// Include the library's header first.
#pragma once

#include "emu_kit/controls.h"
#include "emu_kit/nccl_style.h"

#define EMU_KIT_NCCL_FN(P, name, params, call) \
  EMU_KIT_EXPORT P##Result_t P##name params { return static_cast<P##Result_t>(call); }

#define EMU_KIT_NCCL_COMM(c) reinterpret_cast<void*>(c)
#define EMU_KIT_NCCL_SAME(value, kit) (static_cast<int>(value) == ::emu_kit::nccl::kit)

#define EMU_KIT_NCCL_API(P, STREAM, RUNTIME, DIALECT)                                              \
  namespace { /* never destroyed: streams' workers may call it while the process exits */          \
  ::emu_kit::nccl::Library& P##_library() {                                                        \
    static auto* library = new ::emu_kit::nccl::Library(DIALECT, std::make_unique<RUNTIME>());     \
    return *library;                                                                               \
  }                                                                                                \
  }                                                                                                \
  static_assert(                                                                                   \
      EMU_KIT_NCCL_SAME(P##Success, kSuccess) &&                                                   \
          EMU_KIT_NCCL_SAME(P##InvalidArgument, kInvalidArgument) &&                               \
          EMU_KIT_NCCL_SAME(P##InProgress, kInProgress) && EMU_KIT_NCCL_SAME(P##Int64, kInt64) &&  \
          EMU_KIT_NCCL_SAME(P##Bfloat16, kBfloat16) &&                                             \
          EMU_KIT_NCCL_SAME(P##NumTypes, kNumTypes) && EMU_KIT_NCCL_SAME(P##Avg, kAvg) &&          \
          sizeof(P##UniqueId) == ::emu_kit::nccl::kUniqueIdBytes,                                  \
      "the library keeps NCCL's values");                                                          \
  EMU_KIT_NCCL_FN(P, GetVersion, (int* version),                                                   \
                  P##_library().get_version(#P "GetVersion", version))                             \
  EMU_KIT_NCCL_FN(                                                                                 \
      P, GetUniqueId, (P##UniqueId * uniqueId),                                                    \
      P##_library().get_unique_id(#P "GetUniqueId", uniqueId ? uniqueId->internal : nullptr))      \
  EMU_KIT_EXPORT P##Result_t P##CommInitRank(P##Comm_t* comm, int nranks, P##UniqueId commId,      \
                                             int rank) {                                           \
    void* made = nullptr;                                                                          \
    const int r = P##_library().comm_init_rank(#P "CommInitRank", comm ? &made : nullptr, nranks,  \
                                               commId.internal, rank);                             \
    if (r == P##Success) *comm = reinterpret_cast<P##Comm_t>(made);                                \
    return static_cast<P##Result_t>(r);                                                            \
  }                                                                                                \
  EMU_KIT_NCCL_FN(P, CommAbort, (P##Comm_t comm),                                                  \
                  P##_library().comm_abort(#P "CommAbort", EMU_KIT_NCCL_COMM(comm)))               \
  EMU_KIT_NCCL_FN(P, CommDestroy, (P##Comm_t comm),                                                \
                  P##_library().comm_destroy(#P "CommDestroy", EMU_KIT_NCCL_COMM(comm)))           \
  EMU_KIT_EXPORT P##Result_t P##CommGetAsyncError(P##Comm_t comm, P##Result_t* asyncError) {       \
    int error = 0;                                                                                 \
    const int r = P##_library().comm_get_async_error(                                              \
        #P "CommGetAsyncError", EMU_KIT_NCCL_COMM(comm), asyncError ? &error : nullptr);           \
    if (r == P##Success) *asyncError = static_cast<P##Result_t>(error);                            \
    return static_cast<P##Result_t>(r);                                                            \
  }                                                                                                \
  EMU_KIT_EXPORT const char* P##GetErrorString(P##Result_t result) {                               \
    return P##_library().error_string(result);                                                     \
  }                                                                                                \
  EMU_KIT_EXPORT const char* P##GetLastError(P##Comm_t comm) {                                     \
    return P##_library().last_error(EMU_KIT_NCCL_COMM(comm));                                      \
  }                                                                                                \
  EMU_KIT_NCCL_FN(P, CommCount, (const P##Comm_t comm, int* count),                                \
                  P##_library().comm_count(#P "CommCount", EMU_KIT_NCCL_COMM(comm), count))        \
  EMU_KIT_NCCL_FN(P, CommDevice, (const P##Comm_t comm, int* device),                              \
                  P##_library().comm_device(#P "CommDevice", EMU_KIT_NCCL_COMM(comm), device))     \
  EMU_KIT_NCCL_FN(P, CommUserRank, (const P##Comm_t comm, int* rank),                              \
                  P##_library().comm_user_rank(#P "CommUserRank", EMU_KIT_NCCL_COMM(comm), rank))  \
  EMU_KIT_NCCL_FN(P, Broadcast,                                                                    \
                  (const void* sendbuff, void* recvbuff, size_t count, P##DataType_t datatype,     \
                   int root, P##Comm_t comm, STREAM stream),                                       \
                  P##_library().broadcast(#P "Broadcast", sendbuff, recvbuff, count, datatype,     \
                                          root, EMU_KIT_NCCL_COMM(comm), stream))                  \
  EMU_KIT_NCCL_FN(P, Reduce,                                                                       \
                  (const void* sendbuff, void* recvbuff, size_t count, P##DataType_t datatype,     \
                   P##RedOp_t op, int root, P##Comm_t comm, STREAM stream),                        \
                  P##_library().reduce(#P "Reduce", sendbuff, recvbuff, count, datatype, op, root, \
                                       EMU_KIT_NCCL_COMM(comm), stream))                           \
  EMU_KIT_NCCL_FN(P, AllReduce,                                                                    \
                  (const void* sendbuff, void* recvbuff, size_t count, P##DataType_t datatype,     \
                   P##RedOp_t op, P##Comm_t comm, STREAM stream),                                  \
                  P##_library().all_reduce(#P "AllReduce", sendbuff, recvbuff, count, datatype,    \
                                           op, EMU_KIT_NCCL_COMM(comm), stream))                   \
  EMU_KIT_NCCL_FN(P, ReduceScatter,                                                                \
                  (const void* sendbuff, void* recvbuff, size_t recvcount, P##DataType_t datatype, \
                   P##RedOp_t op, P##Comm_t comm, STREAM stream),                                  \
                  P##_library().reduce_scatter(#P "ReduceScatter", sendbuff, recvbuff, recvcount,  \
                                               datatype, op, EMU_KIT_NCCL_COMM(comm), stream))     \
  EMU_KIT_NCCL_FN(P, AllGather,                                                                    \
                  (const void* sendbuff, void* recvbuff, size_t sendcount, P##DataType_t datatype, \
                   P##Comm_t comm, STREAM stream),                                                 \
                  P##_library().all_gather(#P "AllGather", sendbuff, recvbuff, sendcount,          \
                                           datatype, EMU_KIT_NCCL_COMM(comm), stream))             \
  EMU_KIT_NCCL_FN(P, Send,                                                                         \
                  (const void* sendbuff, size_t count, P##DataType_t datatype, int peer,           \
                   P##Comm_t comm, STREAM stream),                                                 \
                  P##_library().send(#P "Send", sendbuff, count, datatype, peer,                   \
                                     EMU_KIT_NCCL_COMM(comm), stream))                             \
  EMU_KIT_NCCL_FN(P, Recv,                                                                         \
                  (void* recvbuff, size_t count, P##DataType_t datatype, int peer, P##Comm_t comm, \
                   STREAM stream),                                                                 \
                  P##_library().recv(#P "Recv", recvbuff, count, datatype, peer,                   \
                                     EMU_KIT_NCCL_COMM(comm), stream))                             \
  EMU_KIT_NCCL_FN(P, GroupStart, (void), P##_library().group_start(#P "GroupStart"))               \
  EMU_KIT_NCCL_FN(P, GroupEnd, (void), P##_library().group_end(#P "GroupEnd"))
