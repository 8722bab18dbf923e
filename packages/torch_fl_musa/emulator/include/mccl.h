/*
 * MCCL, Moore Threads' collective communication library for MUSA GPUs, as the torch-fl MUSA
 * emulator provides it: NCCL's C API under the mccl prefix (the same function shapes and enum
 * values), 64-bit types and groups mixing kinds of operation included.
 */
#ifndef MCCL_H_
#define MCCL_H_

#include <stddef.h>

#include "musa_runtime_api.h"

#define MCCL_MAJOR 2
#define MCCL_MINOR 11
#define MCCL_PATCH 4
#define MCCL_VERSION_CODE 21104

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mcclComm* mcclComm_t;

#define MCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[MCCL_UNIQUE_ID_BYTES];
} mcclUniqueId;

typedef enum {
  mcclSuccess = 0,
  mcclUnhandledMusaError = 1,
  mcclSystemError = 2,
  mcclInternalError = 3,
  mcclInvalidArgument = 4,
  mcclInvalidUsage = 5,
  mcclRemoteError = 6,
  mcclInProgress = 7,
  mcclNumResults = 8
} mcclResult_t;

typedef enum {
  mcclSum = 0,
  mcclProd = 1,
  mcclMax = 2,
  mcclMin = 3,
  mcclAvg = 4,
  mcclNumOps = 5
} mcclRedOp_t;

typedef enum {
  mcclInt8 = 0,
  mcclChar = 0,
  mcclUint8 = 1,
  mcclInt32 = 2,
  mcclInt = 2,
  mcclUint32 = 3,
  mcclInt64 = 4,
  mcclUint64 = 5,
  mcclFloat16 = 6,
  mcclHalf = 6,
  mcclFloat32 = 7,
  mcclFloat = 7,
  mcclFloat64 = 8,
  mcclDouble = 8,
  mcclBfloat16 = 9,
  mcclNumTypes = 10
} mcclDataType_t;

mcclResult_t mcclGetVersion(int* version);
/* An id for mcclCommInitRank: made once, given to every rank. */
mcclResult_t mcclGetUniqueId(mcclUniqueId* uniqueId);
/* Rank `rank` of `nranks` on the current GPU (musaSetDevice first); blocks until every rank
 * joined. */
mcclResult_t mcclCommInitRank(mcclComm_t* comm, int nranks, mcclUniqueId commId, int rank);
/* Ends the communicator's operations (their peers' too) and frees it. */
mcclResult_t mcclCommAbort(mcclComm_t comm);
/* Waits for the communicator's operations, then frees it. */
mcclResult_t mcclCommDestroy(mcclComm_t comm);
/* The error of the communicator's enqueued operations (mcclSuccess: none). */
mcclResult_t mcclCommGetAsyncError(mcclComm_t comm, mcclResult_t* asyncError);
const char* mcclGetErrorString(mcclResult_t result);
/* The message of the last failure (of `comm`'s operations where it has failed). */
const char* mcclGetLastError(mcclComm_t comm);
mcclResult_t mcclCommCount(const mcclComm_t comm, int* count);
mcclResult_t mcclCommDevice(const mcclComm_t comm, int* device);
mcclResult_t mcclCommUserRank(const mcclComm_t comm, int* rank);

/* Collectives are stream-ordered on `stream`, a stream of the communicator's GPU; buffers are
 * that GPU's memory. Counts are elements of `datatype`. */
mcclResult_t mcclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           mcclDataType_t datatype, int root, mcclComm_t comm, musaStream_t stream);
mcclResult_t mcclReduce(const void* sendbuff, void* recvbuff, size_t count, mcclDataType_t datatype,
                        mcclRedOp_t op, int root, mcclComm_t comm, musaStream_t stream);
mcclResult_t mcclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           mcclDataType_t datatype, mcclRedOp_t op, mcclComm_t comm,
                           musaStream_t stream);
mcclResult_t mcclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               mcclDataType_t datatype, mcclRedOp_t op, mcclComm_t comm,
                               musaStream_t stream);
mcclResult_t mcclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           mcclDataType_t datatype, mcclComm_t comm, musaStream_t stream);
mcclResult_t mcclSend(const void* sendbuff, size_t count, mcclDataType_t datatype, int peer,
                      mcclComm_t comm, musaStream_t stream);
mcclResult_t mcclRecv(void* recvbuff, size_t count, mcclDataType_t datatype, int peer,
                      mcclComm_t comm, musaStream_t stream);
mcclResult_t mcclGroupStart(void);
mcclResult_t mcclGroupEnd(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MCCL_H_ */
