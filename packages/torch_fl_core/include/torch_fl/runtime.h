/*
 * torch-fl runtime ABI, version 1.3.
 *
 * The seam between torch-fl core (which speaks PyTorch) and a vendor runtime
 * (which speaks only its SDK). A runtime is a shared library exporting
 *
 *     const tfl_runtime_v1* tfl_runtime_get(uint32_t abi_version);
 *
 * returning its function table for the requested ABI version, or NULL if it
 * does not speak that version.
 *
 * Versions within v1 (minor versions) only append fields to the end of the
 * table. A runtime sets struct_size to sizeof(tfl_runtime_v1) of the header it
 * was built against; core accepts any table of at least TFL_RUNTIME_V1_0_SIZE
 * bytes (the v1.0 table) and uses a later field only where struct_size covers
 * it and it is not NULL (TFL_RUNTIME_HAS). So a runtime built against an older
 * v1 header keeps working with a newer core, and a newer runtime with an older
 * core, which never reads past the fields it knows. What core does without
 * each later field is stated at the field.
 *
 * Plain C, no torch headers, no C++ types: a vendor runtime compiles against
 * its SDK and this file only.
 *
 * Conventions
 *  - Every function returns a tfl_status; TFL_OK is 0. Out-parameters are only
 *    written on success. On failure the runtime keeps a thread-local message
 *    (the SDK's own status string and call name where there is one), read with
 *    last_error(). Core turns each failure into a PyTorch exception naming the
 *    operation, device, runtime and that message.
 *  - "Device" functions act on the calling thread's current device, like
 *    cudaMalloc/topsMalloc. Device indices are 0..count-1.
 *  - A NULL tfl_stream means the current device's default stream.
 *  - Async functions enqueue work on the stream and return; the work is ordered
 *    after everything previously enqueued on that stream.
 *  - Thread safety: every function may be called concurrently from any thread.
 */
#ifndef TORCH_FL_RUNTIME_H_
#define TORCH_FL_RUNTIME_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TFL_RUNTIME_ABI_VERSION 1u
/* The minor version this header describes: the fields of v1.0 plus those
 * marked "v1.1", "v1.2" and "v1.3". */
#define TFL_RUNTIME_ABI_MINOR 3u
#define TFL_RUNTIME_ENTRY_SYMBOL "tfl_runtime_get"

typedef enum tfl_status {
  TFL_OK = 0,
  TFL_ERROR_INVALID_VALUE = 1,       /* a bad argument (size, flag, NULL out-param) */
  TFL_ERROR_INVALID_DEVICE = 2,      /* device index out of range */
  TFL_ERROR_OUT_OF_MEMORY = 3,       /* allocation over the device's capacity */
  TFL_ERROR_INVALID_POINTER = 4,     /* pointer unknown to the runtime, or on the wrong device */
  TFL_ERROR_INVALID_MEMCPY_KIND = 5, /* pointers do not match the requested copy kind */
  TFL_ERROR_NOT_READY = 6,           /* query: work still pending (not a failure) */
  TFL_ERROR_NOT_SUPPORTED = 7,       /* the runtime or device cannot do this */
  TFL_ERROR_INVALID_HANDLE = 8,      /* unknown or destroyed stream/event */
  TFL_ERROR_NOT_INITIALIZED = 9,     /* init() not called or failed */
  TFL_ERROR_DEVICE = 10,             /* the device/SDK reported a failure (see last_error) */
  TFL_ERROR_INJECTED = 11,           /* a test-only fault injected on purpose */
  /* v1.3: not allowed while a stream captures a graph (the capture is then
   * invalidated), or the capture was invalidated earlier (see last_error) */
  TFL_ERROR_CAPTURE = 12,
  /* collective.h v1.0: peers did not arrive within the communicator's timeout */
  TFL_ERROR_TIMEOUT = 13,
  /* collective.h v1.0: the communicator was aborted, here or by a peer (see last_error) */
  TFL_ERROR_ABORTED = 14,
} tfl_status;

/* The enum's own spelling of a status ("TFL_ERROR_OUT_OF_MEMORY"): what a
 * runtime's status_name() returns unless it has better words. */
static inline const char* tfl_status_string(tfl_status status) {
  switch (status) {
    case TFL_OK:
      return "TFL_OK";
    case TFL_ERROR_INVALID_VALUE:
      return "TFL_ERROR_INVALID_VALUE";
    case TFL_ERROR_INVALID_DEVICE:
      return "TFL_ERROR_INVALID_DEVICE";
    case TFL_ERROR_OUT_OF_MEMORY:
      return "TFL_ERROR_OUT_OF_MEMORY";
    case TFL_ERROR_INVALID_POINTER:
      return "TFL_ERROR_INVALID_POINTER";
    case TFL_ERROR_INVALID_MEMCPY_KIND:
      return "TFL_ERROR_INVALID_MEMCPY_KIND";
    case TFL_ERROR_NOT_READY:
      return "TFL_ERROR_NOT_READY";
    case TFL_ERROR_NOT_SUPPORTED:
      return "TFL_ERROR_NOT_SUPPORTED";
    case TFL_ERROR_INVALID_HANDLE:
      return "TFL_ERROR_INVALID_HANDLE";
    case TFL_ERROR_NOT_INITIALIZED:
      return "TFL_ERROR_NOT_INITIALIZED";
    case TFL_ERROR_DEVICE:
      return "TFL_ERROR_DEVICE";
    case TFL_ERROR_INJECTED:
      return "TFL_ERROR_INJECTED";
    case TFL_ERROR_CAPTURE:
      return "TFL_ERROR_CAPTURE";
    case TFL_ERROR_TIMEOUT:
      return "TFL_ERROR_TIMEOUT";
    case TFL_ERROR_ABORTED:
      return "TFL_ERROR_ABORTED";
  }
  return "TFL_ERROR_UNKNOWN";
}

typedef enum tfl_memcpy_kind {
  TFL_MEMCPY_HOST_TO_HOST = 0,
  TFL_MEMCPY_HOST_TO_DEVICE = 1,
  TFL_MEMCPY_DEVICE_TO_HOST = 2,
  TFL_MEMCPY_DEVICE_TO_DEVICE = 3, /* both pointers on the current device */
} tfl_memcpy_kind;

/* Capability flags (tfl_runtime_v1.capabilities). Core adapts to these; it
 * never asks which vendor it is talking to. */
enum {
  /* Device memory is addressable by host code (sim). Host kernels may run
   * directly on device pointers once the stream's earlier work is done. */
  TFL_CAP_HOST_ADDRESSABLE_MEMORY = 1u << 0,
  /* memcpy_peer is supported (device <-> device across cards). */
  TFL_CAP_PEER_COPY = 1u << 1,
  /* Events can measure elapsed time. */
  TFL_CAP_EVENT_TIMING = 1u << 2,
  /* Two different producers (e.g. Triton and native kernels) enqueued on one
   * stream are NOT ordered by the hardware; core inserts a barrier at the
   * producer boundary (docs/routing.md, "Producers on one stream"). */
  TFL_CAP_UNORDERED_PRODUCERS = 1u << 3,
  /* host_malloc returns page-locked memory usable for async copies. */
  TFL_CAP_PINNED_HOST_MEMORY = 1u << 4,
  /* v1.3: the graph_* functions capture stream work and replay it. Without
   * the bit (or the functions) torch.flagos graphs raise naming the runtime. */
  TFL_CAP_GRAPHS = 1u << 5,
};

/* v1.3: how far a capture reaches (graph_capture_begin), as CUDA's modes:
 * GLOBAL forbids the unsafe calls below in every thread of the process,
 * THREAD_LOCAL only in the thread that began the capture, RELAXED nowhere. */
typedef enum tfl_capture_mode {
  TFL_CAPTURE_MODE_GLOBAL = 0,
  TFL_CAPTURE_MODE_THREAD_LOCAL = 1,
  TFL_CAPTURE_MODE_RELAXED = 2,
} tfl_capture_mode;

/* v1.3: a stream's capture state (stream_capture_status). */
typedef enum tfl_capture_status {
  TFL_CAPTURE_NONE = 0,        /* not capturing: work runs */
  TFL_CAPTURE_ACTIVE = 1,      /* capturing: work is recorded, not run */
  TFL_CAPTURE_INVALIDATED = 2, /* capturing, but a forbidden call broke it */
} tfl_capture_status;

/* Event flags (event_create). */
enum {
  TFL_EVENT_DEFAULT = 0,
  TFL_EVENT_DISABLE_TIMING = 1u << 0,
};

/* Pointer kinds (pointer_info). */
typedef enum tfl_pointer_kind {
  TFL_POINTER_UNKNOWN = 0, /* not allocated by this runtime */
  TFL_POINTER_DEVICE = 1,  /* inside a malloc() allocation */
  TFL_POINTER_HOST = 2,    /* inside a host_malloc() (pinned) allocation */
} tfl_pointer_kind;

/* An allocation exported to another process (ipc_get_handle): opaque bytes a
 * runtime fills as it needs (a file descriptor and process id, an SDK IPC
 * handle), sent by core and given back to ipc_open_handle there. */
#define TFL_IPC_HANDLE_SIZE 64
typedef struct tfl_ipc_handle {
  uint8_t bytes[TFL_IPC_HANDLE_SIZE];
} tfl_ipc_handle;

typedef struct tfl_stream_st* tfl_stream;
typedef struct tfl_event_st* tfl_event;
typedef void (*tfl_host_fn)(void* user_data);
typedef struct tfl_graph_st* tfl_graph; /* v1.3: recorded stream work */

typedef struct tfl_runtime_v1 {
  uint32_t abi_version;  /* TFL_RUNTIME_ABI_VERSION the table was built for */
  uint32_t struct_size;  /* sizeof(tfl_runtime_v1) at build time */
  const char* name;      /* short runtime name, e.g. "sim", "topsrt" */
  uint64_t capabilities; /* TFL_CAP_* bits */

  /* ---- lifetime and errors ---- */
  tfl_status (*init)(void);                      /* idempotent; safe to call from several threads */
  const char* (*status_name)(tfl_status status); /* "TFL_ERROR_OUT_OF_MEMORY" */
  const char* (*last_error)(void); /* this thread's message for its last failure; "" if none */

  /* ---- devices ---- */
  tfl_status (*device_count)(int* count);
  tfl_status (*get_device)(int* device);
  tfl_status (*set_device)(int device);
  tfl_status (*device_synchronize)(void); /* all streams of the current device */
  tfl_status (*mem_get_info)(size_t* free_bytes, size_t* total_bytes); /* current device */
  tfl_status (*device_name)(int device, char* buf, size_t len);

  /* ---- memory ---- */
  tfl_status (*malloc)(void** ptr, size_t size);      /* current device; size 0 gives NULL */
  tfl_status (*free)(void* ptr);                      /* any device's pointer; waits for nothing */
  tfl_status (*host_malloc)(void** ptr, size_t size); /* pinned host memory */
  tfl_status (*host_free)(void* ptr);
  /* Which allocation a pointer (anywhere inside it) belongs to. For device
   * pointers *device is the owning device; for host pointers it is -1. An
   * unknown pointer is TFL_OK with kind TFL_POINTER_UNKNOWN. */
  tfl_status (*pointer_info)(const void* ptr, tfl_pointer_kind* kind, int* device);

  /* ---- copies ---- */
  /* Synchronous with respect to the host: returns when the bytes have moved,
   * after the current device's default stream work. */
  tfl_status (*memcpy)(void* dst, const void* src, size_t n, tfl_memcpy_kind kind);
  tfl_status (*memcpy_async)(void* dst, const void* src, size_t n, tfl_memcpy_kind kind,
                             tfl_stream stream);
  /* Device-to-device across cards; stream belongs to the current device. */
  tfl_status (*memcpy_peer_async)(void* dst, int dst_device, const void* src, int src_device,
                                  size_t n, tfl_stream stream);
  tfl_status (*memset_async)(void* ptr, int value, size_t n, tfl_stream stream);

  /* ---- streams (owned by the current device at creation) ---- */
  tfl_status (*stream_create)(tfl_stream* stream, int priority);
  tfl_status (*stream_destroy)(tfl_stream stream);
  tfl_status (*stream_synchronize)(tfl_stream stream);
  tfl_status (*stream_query)(tfl_stream stream); /* TFL_OK when idle, else TFL_ERROR_NOT_READY */
  tfl_status (*stream_wait_event)(tfl_stream stream, tfl_event event);
  /* Run fn(user_data) on the stream, in order, after earlier work. fn must not
   * call back into the runtime. */
  tfl_status (*launch_host_func)(tfl_stream stream, tfl_host_fn fn, void* user_data);

  /* ---- events ---- */
  tfl_status (*event_create)(tfl_event* event, uint32_t flags);
  tfl_status (*event_destroy)(tfl_event event);
  tfl_status (*event_record)(tfl_event event, tfl_stream stream);
  tfl_status (*event_synchronize)(tfl_event event);
  tfl_status (*event_query)(tfl_event event); /* TFL_OK when reached, else TFL_ERROR_NOT_READY */
  tfl_status (*event_elapsed_ms)(float* ms, tfl_event start, tfl_event end);

  /* ---- v1.1: device memory shared between processes ----
   * Without these (a v1.0 runtime, or NULL), flagos tensors cannot be sent to
   * another process: torch.multiprocessing raises naming the device and .cpu().
   */
  /* A handle for the device allocation containing ptr that another process of
   * the same machine can open; *offset is ptr's distance from the allocation's
   * start and *size the allocation's size. The handle is valid while this
   * process holds the allocation. */
  tfl_status (*ipc_get_handle)(const void* ptr, tfl_ipc_handle* handle, size_t* offset,
                               size_t* size);
  /* Map an allocation exported by another process: *ptr is its start in this
   * process, *device the device it lives on. The mapping stays valid until
   * ipc_close_handle, also after the exporting process frees it or exits.
   * Opening one handle twice gives the same *ptr (each open needs a close). */
  tfl_status (*ipc_open_handle)(const tfl_ipc_handle* handle, void** ptr, size_t* size,
                                int* device);
  tfl_status (*ipc_close_handle)(void* ptr); /* a pointer ipc_open_handle gave */

  /* ---- v1.2: the SDK behind the table ---- */
  /* The SDK's own handle (topsStream_t, aclrtStream, ...) behind `stream`, a
   * stream of `device`; a NULL stream is `device`'s default stream. Kernels
   * libraries and launchers (Triton) that call the SDK directly enqueue on it,
   * so they run in flagos stream order. Valid while the stream lives. Needs no
   * current device. Without it (a v1.0/v1.1 runtime, or NULL),
   * torch.ops.torch_fl._native_stream raises naming the device, the runtime
   * and the missing field; core itself never needs it. */
  tfl_status (*native_stream)(tfl_stream stream, int device, void** out);
  /* Whether the runtime's devices are there, without torch and initialising
   * no more than counting them needs (core has not loaded the library yet):
   * the only function callable before init(). TFL_OK with *count the number of
   * devices; when that is 0, msg says why (else it is ""). On failure a status,
   * *count 0 and msg the reason (the SDK call and its status string). Unlike
   * other functions it writes *count and msg (len bytes, NUL-terminated, when
   * len > 0) on failure too. Without it (a v1.0/v1.1 runtime, or NULL),
   * torch_fl.vendors.sdk.probe_runtime calls the probe symbol the vendor names
   * (older runtimes exported one off the table), else reports no device. */
  tfl_status (*probe)(int* count, char* msg, size_t len);

  /* ---- v1.3: device graphs (declared by TFL_CAP_GRAPHS) ----
   * While `stream` captures, the work enqueued on it (copies, memsets, host
   * functions, event records and waits, SDK kernels on its native stream) is
   * recorded instead of run; graph_launch runs the recording again, reading
   * and writing the same addresses, so the caller keeps the memory alive and
   * in place (core's allocator gives captures a private pool); a captured
   * copy from pageable host memory reads it at replay. Unsafe while capturing,
   * in the threads the mode reaches: device_synchronize of the capturing
   * device, memcpy on it, host_malloc. Unsafe in every mode (the work is
   * recorded, not run): synchronize, query or destroy of the capturing
   * stream, synchronize or query of an event recorded in the capture. Such a
   * call fails with TFL_ERROR_CAPTURE and invalidates the capture; so does
   * later work on it. malloc and free stay allowed. Work on other streams is
   * not captured; a stream that waits on an event recorded in the capture
   * joins it where the runtime can (else TFL_ERROR_NOT_SUPPORTED, invalidating
   * it); the capturing stream waiting on an event recorded outside it is
   * TFL_ERROR_CAPTURE (as CUDA). Without these fields, torch.flagos graphs
   * raise naming the runtime. */
  /* Begin capturing on `stream` (not the NULL/default stream): tfl_capture_mode. */
  tfl_status (*graph_capture_begin)(tfl_stream stream, int mode);
  /* End the capture begun on `stream`, in the thread that began it unless the
   * mode is RELAXED: *graph is the recording. When the capture was
   * invalidated, TFL_ERROR_CAPTURE with the reason (and no graph); either way
   * the stream no longer captures. */
  tfl_status (*graph_capture_end)(tfl_stream stream, tfl_graph* graph);
  /* Prepare `graph` for launching; a launch of a graph not instantiated does
   * it first. Idempotent. */
  tfl_status (*graph_instantiate)(tfl_graph graph);
  /* Enqueue the recorded work on `stream`, a stream of the capture's device
   * (NULL: the current device's default stream), ordered as any other work on
   * it. On a capturing stream the graph's work is recorded into that capture
   * (else TFL_ERROR_NOT_SUPPORTED). */
  tfl_status (*graph_launch)(tfl_graph graph, tfl_stream stream);
  /* Destroy `graph`; launches already queued still complete. */
  tfl_status (*graph_destroy)(tfl_graph graph);
  /* *status is the tfl_capture_status of `stream`. */
  tfl_status (*stream_capture_status)(tfl_stream stream, int* status);
} tfl_runtime_v1;

/* Every field of the table after the header fields, in order:
 * X(name, minor, returns_status): the minor version that added it, and 1 where
 * it returns a tfl_status. Core, the sim runtime's fault injection and the ABI
 * tests take the table's names from this one list. */
#define TFL_RUNTIME_V1_FUNCTIONS(X) \
  X(init, 0, 1)                     \
  X(status_name, 0, 0)              \
  X(last_error, 0, 0)               \
  X(device_count, 0, 1)             \
  X(get_device, 0, 1)               \
  X(set_device, 0, 1)               \
  X(device_synchronize, 0, 1)       \
  X(mem_get_info, 0, 1)             \
  X(device_name, 0, 1)              \
  X(malloc, 0, 1)                   \
  X(free, 0, 1)                     \
  X(host_malloc, 0, 1)              \
  X(host_free, 0, 1)                \
  X(pointer_info, 0, 1)             \
  X(memcpy, 0, 1)                   \
  X(memcpy_async, 0, 1)             \
  X(memcpy_peer_async, 0, 1)        \
  X(memset_async, 0, 1)             \
  X(stream_create, 0, 1)            \
  X(stream_destroy, 0, 1)           \
  X(stream_synchronize, 0, 1)       \
  X(stream_query, 0, 1)             \
  X(stream_wait_event, 0, 1)        \
  X(launch_host_func, 0, 1)         \
  X(event_create, 0, 1)             \
  X(event_destroy, 0, 1)            \
  X(event_record, 0, 1)             \
  X(event_synchronize, 0, 1)        \
  X(event_query, 0, 1)              \
  X(event_elapsed_ms, 0, 1)         \
  X(ipc_get_handle, 1, 1)           \
  X(ipc_open_handle, 1, 1)          \
  X(ipc_close_handle, 1, 1)         \
  X(native_stream, 2, 1)            \
  X(probe, 2, 1)                    \
  X(graph_capture_begin, 3, 1)      \
  X(graph_capture_end, 3, 1)        \
  X(graph_instantiate, 3, 1)        \
  X(graph_launch, 3, 1)             \
  X(graph_destroy, 3, 1)            \
  X(stream_capture_status, 3, 1)

/* The size of the v1.0 table: the smallest struct_size core accepts. */
#define TFL_RUNTIME_V1_0_SIZE \
  ((uint32_t)(offsetof(tfl_runtime_v1, event_elapsed_ms) + sizeof(void (*)(void))))

/* Whether table `rt` has `field`: its struct_size covers it and it is set. */
#define TFL_RUNTIME_HAS(rt, field)                                               \
  ((rt)->struct_size >= offsetof(tfl_runtime_v1, field) + sizeof((rt)->field) && \
   (rt)->field != NULL)

typedef const tfl_runtime_v1* (*tfl_runtime_get_fn)(uint32_t abi_version);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TORCH_FL_RUNTIME_H_ */
