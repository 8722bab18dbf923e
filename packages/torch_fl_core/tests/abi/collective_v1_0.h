/*
 * torch-fl collective ABI, version 1.0.
 *
 * The seam between torch-fl core (its c10d backend) and a vendor's collective
 * library (HCCL, ECCL, NCCL, ...). A collective library is a shared library
 * exporting
 *
 *     const tfl_collective_v1* tfl_collective_get(uint32_t abi_version);
 *
 * returning its function table for the requested ABI version, or NULL if it
 * does not speak that version. It may be the vendor's runtime library itself
 * (sim exports it from libtorch_fl_sim.so beside tfl_runtime_get).
 *
 * Versions follow runtime.h: minor versions only append fields; a library sets
 * struct_size to sizeof(tfl_collective_v1) of the header it was built
 * against; core accepts any table of at least TFL_COLLECTIVE_V1_0_SIZE bytes
 * and uses a later field only where TFL_COLLECTIVE_HAS says it is there.
 *
 * Plain C, no torch headers: a library compiles against its SDK, runtime.h
 * (for tfl_status and tfl_stream) and this file.
 *
 * Conventions (those of runtime.h, plus):
 *  - Every function returns a tfl_status; out-parameters are written only on
 *    success; a failure leaves a thread-local message for last_error() naming
 *    the call, the communicator's rank and what was wrong.
 *  - A communicator (tfl_comm) is one rank of a group of `nranks` ranks, bound
 *    to one device of the runtime. Ranks may be processes or threads.
 *  - Operations are stream-ordered: they validate their arguments, enqueue
 *    the work on `stream` (a tfl_stream of the communicator's device; NULL is
 *    the current device's default stream, which must be that device) and
 *    return. The work runs after everything enqueued on the stream before it
 *    and reads its send buffer then; later work on the stream sees its
 *    result. Buffers are device memory of the communicator's device.
 *  - Every rank calls the same collectives on a communicator in the same
 *    order with the same count, dtype, op and root; a library may check this
 *    and fail them all (TFL_ERROR_INVALID_VALUE, naming the rank that
 *    differs). Operations issued on one communicator from several streams
 *    must be ordered by the caller (events), or ranks may pair them
 *    differently.
 *  - Failures that happen while the work runs (a peer that never arrives, an
 *    abort) are not returned by the call that enqueued it: they become the
 *    communicator's asynchronous error (comm_async_error), and from then on
 *    every operation on it fails at once with that status. The contents of
 *    the receive buffers of failed operations are undefined.
 *  - Never a hang: a wait for peers that lasts longer than the
 *    communicator's timeout (comm_init's timeout_ms, else the library's
 *    default, which a library lets an environment variable set) fails with
 *    TFL_ERROR_TIMEOUT; comm_abort wakes every wait at once.
 *  - Thread safety: every function may be called from any thread. Operations
 *    of one communicator issued from several threads at once are enqueued in
 *    some order (as above, the caller orders them); group_start/group_end are
 *    per thread.
 */
/* Frozen: the v1.0 header as released (tests build an older library with it). */
#ifndef TORCH_FL_COLLECTIVE_H_
#define TORCH_FL_COLLECTIVE_H_

#include <stddef.h>
#include <stdint.h>

#include "torch_fl/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TFL_COLLECTIVE_ABI_VERSION 1u
#define TFL_COLLECTIVE_ABI_MINOR 0u
#define TFL_COLLECTIVE_ENTRY_SYMBOL "tfl_collective_get"

/* Element types. Every value is the same in all minor versions; a library
 * that lacks one returns TFL_ERROR_NOT_SUPPORTED naming it. */
typedef enum tfl_dtype {
  TFL_DTYPE_F16 = 0,  /* IEEE half */
  TFL_DTYPE_BF16 = 1, /* bfloat16 */
  TFL_DTYPE_F32 = 2,
  TFL_DTYPE_F64 = 3,
  TFL_DTYPE_I8 = 4,
  TFL_DTYPE_U8 = 5,
  TFL_DTYPE_I32 = 6,
  TFL_DTYPE_I64 = 7,
  /* One byte, 0 or 1. Reductions are logical: SUM and MAX are "or", PROD and
   * MIN are "and" (what torch's bool reductions give); AVG is not defined. A
   * library whose SDK has no bool passes it as u8 where that gives the same
   * bytes (MAX, MIN; SUM and PROD only where it normalises to 0/1). */
  TFL_DTYPE_BOOL = 8,
} tfl_dtype;
#define TFL_DTYPE_COUNT 9

/* Reductions. AVG is the sum divided by nranks, for floating types only in
 * sim (an SDK that has integer AVG may offer it). Integer SUM and PROD wrap
 * around (two's complement); floating MIN and MAX propagate NaN. */
typedef enum tfl_reduce_op {
  TFL_REDUCE_SUM = 0,
  TFL_REDUCE_PROD = 1,
  TFL_REDUCE_MIN = 2,
  TFL_REDUCE_MAX = 3,
  TFL_REDUCE_AVG = 4,
} tfl_reduce_op;
#define TFL_REDUCE_OP_COUNT 5

/* A communicator's rendezvous: opaque bytes unique_id fills (an SDK's own id
 * in its first bytes: HCCL's HcclRootInfo is 4108 bytes, ncclUniqueId and
 * ECCL's 128), copied by the caller to every rank (core sends it through the
 * c10d store). The size has room for any of them. */
#define TFL_COMM_ID_SIZE 8192
typedef struct tfl_comm_id {
  uint8_t bytes[TFL_COMM_ID_SIZE];
} tfl_comm_id;

typedef struct tfl_comm_st* tfl_comm;

typedef struct tfl_collective_v1 {
  uint32_t abi_version; /* TFL_COLLECTIVE_ABI_VERSION the table was built for */
  uint32_t struct_size; /* sizeof(tfl_collective_v1) at build time */
  const char* name;     /* short library name, e.g. "sim", "hccl", "nccl" */

  /* ---- errors ---- */
  const char* (*status_name)(tfl_status status); /* as runtime.h's status_name */
  const char* (*last_error)(void); /* this thread's message for its last failure; "" if none */

  /* ---- communicators ---- */
  /* A fresh id for a new communicator, made by one rank (core: rank 0) and
   * given by the caller to every rank's comm_init. Not a collective call. */
  tfl_status (*unique_id)(tfl_comm_id* id);
  /* Joins `rank` (0 <= rank < nranks) of the communicator named by `id` on
   * `device` (any device of the runtime; the thread's current device does not
   * change). Blocks until all nranks ranks have joined, or fails with
   * TFL_ERROR_TIMEOUT naming the missing ranks after timeout_ms (0: the
   * library's default). timeout_ms is also the limit of every later wait of
   * the communicator for its peers. A rank already joined, or nranks that
   * differ between ranks, are TFL_ERROR_INVALID_VALUE. */
  tfl_status (*comm_init)(tfl_comm* comm, int nranks, const tfl_comm_id* id, int rank, int device,
                          uint32_t timeout_ms);
  /* New communicators from `comm`, as ncclCommSplit: a collective call of
   * every rank of `comm` (blocking, host-side, not on a stream); ranks with
   * the same `color` (>= 0) form one, ordered by `key` then by their rank in
   * `comm`; a negative color joins none (*out is NULL). The new communicator
   * keeps `comm`'s device and timeout. NULL in a library without splitting:
   * core then makes each sub-group from a fresh unique_id through its store. */
  tfl_status (*comm_split)(tfl_comm comm, int color, int key, tfl_comm* out);
  /* Releases `comm` after its enqueued operations finished (or failed); not a
   * collective call. Any thread, once; the handle is invalid afterwards. */
  tfl_status (*comm_destroy)(tfl_comm comm);
  /* Breaks `comm` for good, from any thread, without waiting: its pending
   * operations stop waiting and fail, later ones fail at once, and its peers'
   * waits fail too (promptly where the library can tell them; at the latest
   * by their timeout). All with TFL_ERROR_ABORTED. comm_destroy still
   * releases it. Idempotent. */
  tfl_status (*comm_abort)(tfl_comm comm);
  /* *error: the first failure of `comm`'s enqueued work (TFL_OK if none; or
   * TFL_ERROR_ABORTED after comm_abort). When it is not TFL_OK, this
   * thread's last_error() is set to that failure's message. Never blocks. */
  tfl_status (*comm_async_error)(tfl_comm comm, tfl_status* error);
  /* The communicator's rank, size and device (any out-parameter may be NULL). */
  tfl_status (*comm_info)(tfl_comm comm, int* rank, int* nranks, int* device);

  /* ---- collectives (stream-ordered; count in elements) ----
   * In place is allowed where send == recv (for all_gather: send == recv +
   * rank * count; reduce_scatter: send + rank * count == recv). A count of 0
   * is a no-op that still validates its arguments. dtype is a tfl_dtype, op
   * a tfl_reduce_op, root a rank. */
  /* recv[i] = op over ranks of send[i], on every rank. */
  tfl_status (*all_reduce)(const void* send, void* recv, size_t count, int dtype, int op,
                           tfl_comm comm, tfl_stream stream);
  /* recv = root's send, on every rank (send is read on root only and may be
   * NULL elsewhere). */
  tfl_status (*broadcast)(const void* send, void* recv, size_t count, int dtype, int root,
                          tfl_comm comm, tfl_stream stream);
  /* root's recv[i] = op over ranks of send[i]; recv is used on root only
   * (NULL elsewhere). */
  tfl_status (*reduce)(const void* send, void* recv, size_t count, int dtype, int op, int root,
                       tfl_comm comm, tfl_stream stream);
  /* recv[r * count + i] = rank r's send[i]; recv holds nranks * count. */
  tfl_status (*all_gather)(const void* send, void* recv, size_t count, int dtype, tfl_comm comm,
                           tfl_stream stream);
  /* recv[i] = op over ranks of their send[rank * count + i]; send holds
   * nranks * count, recv count. */
  tfl_status (*reduce_scatter)(const void* send, void* recv, size_t count, int dtype, int op,
                               tfl_comm comm, tfl_stream stream);
  /* recv[r * count + i] = rank r's send[rank * count + i]: equal counts; both
   * hold nranks * count. send and recv must not overlap. */
  tfl_status (*all_to_all)(const void* send, void* recv, size_t count, int dtype, tfl_comm comm,
                           tfl_stream stream);

  /* ---- point to point (stream-ordered) ----
   * A send to `peer` pairs with peer's recv from this rank in issue order;
   * both name the same count and dtype (a library may check the size and
   * fail the recv naming the sender). Outside a group each may hold its stream
   * until the peer takes part (NCCL's do, sim's once a message outgrows its
   * mailbox), so two ranks that both send first may wait until the timeout;
   * inside a group they progress together. */
  tfl_status (*send)(const void* buf, size_t count, int dtype, int peer, tfl_comm comm,
                     tfl_stream stream);
  tfl_status (*recv)(void* buf, size_t count, int dtype, int peer, tfl_comm comm,
                     tfl_stream stream);

  /* ---- groups (per thread, nesting) ----
   * Operations issued between group_start and the matching outermost
   * group_end are validated at their call and issued together at group_end:
   * sends and receives of a group progress concurrently, so any pattern of
   * them (a ring, all pairs) completes without deadlock. A library may
   * require one stream per group (sim does: another stream is
   * TFL_ERROR_NOT_SUPPORTED at the call). An operation whose call failed is
   * not part of the group. group_end without group_start is
   * TFL_ERROR_INVALID_VALUE. */
  tfl_status (*group_start)(void);
  tfl_status (*group_end)(void);
} tfl_collective_v1;

/* Every field of the table after the header fields, in order:
 * X(name, minor, returns_status), as TFL_RUNTIME_V1_FUNCTIONS. */
#define TFL_COLLECTIVE_V1_FUNCTIONS(X) \
  X(status_name, 0, 0)                 \
  X(last_error, 0, 0)                  \
  X(unique_id, 0, 1)                   \
  X(comm_init, 0, 1)                   \
  X(comm_split, 0, 1)                  \
  X(comm_destroy, 0, 1)                \
  X(comm_abort, 0, 1)                  \
  X(comm_async_error, 0, 1)            \
  X(comm_info, 0, 1)                   \
  X(all_reduce, 0, 1)                  \
  X(broadcast, 0, 1)                   \
  X(reduce, 0, 1)                      \
  X(all_gather, 0, 1)                  \
  X(reduce_scatter, 0, 1)              \
  X(all_to_all, 0, 1)                  \
  X(send, 0, 1)                        \
  X(recv, 0, 1)                        \
  X(group_start, 0, 1)                 \
  X(group_end, 0, 1)

/* Fields of v1.0 that a library may leave NULL (core has a way without). */
#define TFL_COLLECTIVE_V1_OPTIONAL(X) X(comm_split)

/* The size of the v1.0 table: the smallest struct_size core accepts. */
#define TFL_COLLECTIVE_V1_0_SIZE \
  ((uint32_t)(offsetof(tfl_collective_v1, group_end) + sizeof(void (*)(void))))

/* Whether table `cl` has `field`: its struct_size covers it and it is set. */
#define TFL_COLLECTIVE_HAS(cl, field)                                               \
  ((cl)->struct_size >= offsetof(tfl_collective_v1, field) + sizeof((cl)->field) && \
   (cl)->field != NULL)

typedef const tfl_collective_v1* (*tfl_collective_get_fn)(uint32_t abi_version);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TORCH_FL_COLLECTIVE_H_ */
