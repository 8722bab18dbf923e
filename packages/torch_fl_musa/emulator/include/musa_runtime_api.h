/*
 * MUSA runtime API -- the subset torch-fl uses, with the names, values and
 * signatures of the MUSA SDK's musa_runtime_api.h (CUDA's shape with the
 * `musa` prefix; docs/musa.md, "The SDK facts").
 *
 * This header belongs to the torch-fl MUSA EMULATOR: it is never shipped in a
 * wheel, and code built against it must build unchanged against a real
 * MUSA_HOME. Emulator-only controls live in musa_emulator.h, which product
 * code never includes.
 */
#ifndef MUSA_RUNTIME_API_H_
#define MUSA_RUNTIME_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum musaError {
  musaSuccess = 0,
  musaErrorInvalidValue = 1,
  musaErrorMemoryAllocation = 2,
  musaErrorInitializationError = 3,
  musaErrorInvalidDevicePointer = 17,
  musaErrorInvalidMemcpyDirection = 21,
  musaErrorNoDevice = 100,
  musaErrorInvalidDevice = 101,
  musaErrorPeerAccessUnsupported = 217,
  musaErrorInvalidResourceHandle = 400,
  musaErrorIllegalState = 401,
  musaErrorNotReady = 600,
  musaErrorIllegalAddress = 700,
  musaErrorNotSupported = 801,
  musaErrorStreamCaptureUnsupported = 900,
  musaErrorStreamCaptureInvalidated = 901,
  musaErrorStreamCaptureMerge = 902,
  musaErrorStreamCaptureUnmatched = 903,
  musaErrorStreamCaptureUnjoined = 904,
  musaErrorStreamCaptureIsolation = 905,
  musaErrorStreamCaptureImplicit = 906,
  musaErrorCapturedEvent = 907,
  musaErrorStreamCaptureWrongThread = 908,
  musaErrorUnknown = 999
} musaError_t;

typedef enum musaMemcpyKind {
  musaMemcpyHostToHost = 0,
  musaMemcpyHostToDevice = 1,
  musaMemcpyDeviceToHost = 2,
  musaMemcpyDeviceToDevice = 3,
  musaMemcpyDefault = 4
} musaMemcpyKind;

typedef enum musaMemoryType {
  musaMemoryTypeUnregistered = 0,
  musaMemoryTypeHost = 1,
  musaMemoryTypeDevice = 2,
  musaMemoryTypeManaged = 3
} musaMemoryType;

struct musaPointerAttributes {
  enum musaMemoryType type;
  int device;
  void* devicePointer;
  void* hostPointer;
};

typedef struct MUstream_st* musaStream_t;
typedef struct MUevent_st* musaEvent_t;
typedef struct MUgraph_st* musaGraph_t;
typedef struct MUgraphExec_st* musaGraphExec_t;
typedef void (*musaHostFn_t)(void* userData);

/* Stream capture (CUDA's, under the musa prefix). */
typedef enum musaStreamCaptureMode {
  musaStreamCaptureModeGlobal = 0,
  musaStreamCaptureModeThreadLocal = 1,
  musaStreamCaptureModeRelaxed = 2
} musaStreamCaptureMode;

typedef enum musaStreamCaptureStatus {
  musaStreamCaptureStatusNone = 0,
  musaStreamCaptureStatusActive = 1,
  musaStreamCaptureStatusInvalidated = 2
} musaStreamCaptureStatus;

typedef enum musaGraphInstantiateFlags {
  musaGraphInstantiateFlagAutoFreeOnLaunch = 1,
  musaGraphInstantiateFlagUpload = 2,
  musaGraphInstantiateFlagDeviceLaunch = 4,
  musaGraphInstantiateFlagUseNodePriority = 8
} musaGraphInstantiateFlags;

#define musaStreamDefault 0x0
#define musaStreamNonBlocking 0x1
#define musaEventDefault 0x0
#define musaEventBlockingSync 0x1
#define musaEventDisableTiming 0x2
#define musaHostAllocDefault 0x0

musaError_t musaGetDeviceCount(int* count);
musaError_t musaGetDevice(int* device);
musaError_t musaSetDevice(int device);
musaError_t musaDeviceSynchronize(void);
musaError_t musaDeviceGetStreamPriorityRange(int* leastPriority, int* greatestPriority);
musaError_t musaMalloc(void** ptr, size_t size);
musaError_t musaFree(void* ptr);
musaError_t musaHostAlloc(void** ptr, size_t size, unsigned int flags);
musaError_t musaFreeHost(void* ptr);
musaError_t musaMemGetInfo(size_t* free_bytes, size_t* total_bytes);
musaError_t musaMemcpy(void* dst, const void* src, size_t bytes, musaMemcpyKind kind);
musaError_t musaMemcpyAsync(void* dst, const void* src, size_t bytes, musaMemcpyKind kind,
                            musaStream_t stream);
musaError_t musaMemcpyPeer(void* dst, int dstDevice, const void* src, int srcDevice, size_t bytes);
musaError_t musaMemcpyPeerAsync(void* dst, int dstDevice, const void* src, int srcDevice,
                                size_t bytes, musaStream_t stream);
musaError_t musaMemset(void* dst, int value, size_t bytes);
musaError_t musaMemsetAsync(void* dst, int value, size_t bytes, musaStream_t stream);
musaError_t musaPointerGetAttributes(struct musaPointerAttributes* attributes, const void* ptr);
musaError_t musaStreamCreate(musaStream_t* stream);
musaError_t musaStreamCreateWithFlags(musaStream_t* stream, unsigned int flags);
musaError_t musaStreamCreateWithPriority(musaStream_t* stream, unsigned int flags, int priority);
musaError_t musaStreamDestroy(musaStream_t stream);
musaError_t musaStreamQuery(musaStream_t stream);
musaError_t musaStreamSynchronize(musaStream_t stream);
musaError_t musaStreamWaitEvent(musaStream_t stream, musaEvent_t event, unsigned int flags);
musaError_t musaEventCreate(musaEvent_t* event);
musaError_t musaEventCreateWithFlags(musaEvent_t* event, unsigned int flags);
musaError_t musaEventRecord(musaEvent_t event, musaStream_t stream);
musaError_t musaEventSynchronize(musaEvent_t event);
musaError_t musaEventQuery(musaEvent_t event);
musaError_t musaEventDestroy(musaEvent_t event);
musaError_t musaEventElapsedTime(float* ms, musaEvent_t start, musaEvent_t end);
musaError_t musaLaunchHostFunc(musaStream_t stream, musaHostFn_t fn, void* userData);
musaError_t musaStreamBeginCapture(musaStream_t stream, enum musaStreamCaptureMode mode);
musaError_t musaStreamEndCapture(musaStream_t stream, musaGraph_t* pGraph);
musaError_t musaStreamIsCapturing(musaStream_t stream,
                                  enum musaStreamCaptureStatus* pCaptureStatus);
musaError_t musaThreadExchangeStreamCaptureMode(enum musaStreamCaptureMode* mode);
musaError_t musaGraphInstantiate(musaGraphExec_t* pGraphExec, musaGraph_t graph,
                                 unsigned long long flags);
musaError_t musaGraphLaunch(musaGraphExec_t graphExec, musaStream_t stream);
musaError_t musaGraphExecDestroy(musaGraphExec_t graphExec);
musaError_t musaGraphDestroy(musaGraph_t graph);
const char* musaGetErrorString(musaError_t error);
musaError_t musaGetLastError(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MUSA_RUNTIME_API_H_ */
