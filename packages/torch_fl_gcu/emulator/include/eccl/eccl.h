/*
 * ECCL, Enflame's collective communication library for GCUs (TopsRider), as
 * the torch-fl TopsRider emulator provides it: the C API of ECCL 3.x, which
 * follows NCCL's (the same function shapes and enum values), with the limits
 * ECCL documents: only ecclBroadcast and ecclAllGather take 64-bit types, and
 * a group (ecclGroupStart/End) aggregates operations of one kind only (sends
 * and receives together count as one kind).
 */
#ifndef ECCL_H_
#define ECCL_H_

#include <stddef.h>

#include "tops_runtime_api.h"

#define ECCL_MAJOR 3
#define ECCL_MINOR 1
#define ECCL_PATCH 0
#define ECCL_VERSION_CODE 30100

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ecclComm* ecclComm_t;

#define ECCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[ECCL_UNIQUE_ID_BYTES];
} ecclUniqueId;

typedef enum {
  ecclSuccess = 0,
  ecclUnhandledTopsError = 1,
  ecclSystemError = 2,
  ecclInternalError = 3,
  ecclInvalidArgument = 4,
  ecclInvalidUsage = 5,
  ecclRemoteError = 6,
  ecclInProgress = 7,
  ecclNumResults = 8
} ecclResult_t;

typedef enum {
  ecclSum = 0,
  ecclProd = 1,
  ecclMax = 2,
  ecclMin = 3,
  ecclAvg = 4,
  ecclNumOps = 5
} ecclRedOp_t;

typedef enum {
  ecclInt8 = 0,
  ecclChar = 0,
  ecclUint8 = 1,
  ecclInt32 = 2,
  ecclInt = 2,
  ecclUint32 = 3,
  ecclInt64 = 4,
  ecclUint64 = 5,
  ecclFloat16 = 6,
  ecclHalf = 6,
  ecclFloat32 = 7,
  ecclFloat = 7,
  ecclFloat64 = 8,
  ecclDouble = 8,
  ecclBfloat16 = 9,
  ecclNumTypes = 10
} ecclDataType_t;

ecclResult_t ecclGetVersion(int* version);
/* An id for ecclCommInitRank: made once, given to every rank. */
ecclResult_t ecclGetUniqueId(ecclUniqueId* uniqueId);
/* Rank `rank` of `nranks` on the current GCU (topsSetDevice first); blocks until every rank
 * joined. */
ecclResult_t ecclCommInitRank(ecclComm_t* comm, int nranks, ecclUniqueId commId, int rank);
/* Ends the communicator's operations (their peers' too) and frees it. */
ecclResult_t ecclCommAbort(ecclComm_t comm);
/* Waits for the communicator's operations, then frees it. */
ecclResult_t ecclCommDestroy(ecclComm_t comm);
/* The error of the communicator's enqueued operations (ecclSuccess: none). */
ecclResult_t ecclCommGetAsyncError(ecclComm_t comm, ecclResult_t* asyncError);
const char* ecclGetErrorString(ecclResult_t result);
/* The message of the last failure (of `comm`'s operations where it has failed). */
const char* ecclGetLastError(ecclComm_t comm);
ecclResult_t ecclCommCount(const ecclComm_t comm, int* count);
ecclResult_t ecclCommDevice(const ecclComm_t comm, int* device);
ecclResult_t ecclCommUserRank(const ecclComm_t comm, int* rank);

/* Collectives are stream-ordered on `stream`, a stream of the communicator's GCU; buffers are
 * that GCU's memory. Counts are elements of `datatype`. */
ecclResult_t ecclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ecclDataType_t datatype, int root, ecclComm_t comm, topsStream_t stream);
ecclResult_t ecclReduce(const void* sendbuff, void* recvbuff, size_t count, ecclDataType_t datatype,
                        ecclRedOp_t op, int root, ecclComm_t comm, topsStream_t stream);
ecclResult_t ecclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ecclDataType_t datatype, ecclRedOp_t op, ecclComm_t comm,
                           topsStream_t stream);
ecclResult_t ecclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ecclDataType_t datatype, ecclRedOp_t op, ecclComm_t comm,
                               topsStream_t stream);
ecclResult_t ecclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ecclDataType_t datatype, ecclComm_t comm, topsStream_t stream);
ecclResult_t ecclSend(const void* sendbuff, size_t count, ecclDataType_t datatype, int peer,
                      ecclComm_t comm, topsStream_t stream);
ecclResult_t ecclRecv(void* recvbuff, size_t count, ecclDataType_t datatype, int peer,
                      ecclComm_t comm, topsStream_t stream);
ecclResult_t ecclGroupStart(void);
ecclResult_t ecclGroupEnd(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ECCL_H_ */
