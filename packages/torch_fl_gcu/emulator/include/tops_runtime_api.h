/*
 * TopsRider runtime API (topsrt) -- the subset torch-fl uses, with the names,
 * values and signatures of the SDK's tops_runtime_api.h
 * (the SDK facts docs/gcu.md lists under "The runtime over topsrt").
 *
 * This header belongs to the torch-fl TopsRider EMULATOR: it is never shipped
 * in a wheel, and code built against it must build unchanged against a real
 * TOPS_HOME. Emulator-only controls live in tops_emulator.h, which product
 * code never includes.
 */
#ifndef TOPS_RUNTIME_API_H_
#define TOPS_RUNTIME_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum topsError_t {
  topsSuccess = 0,
  topsErrorInvalidValue = 1,
  topsErrorOutOfMemory = 2,
  topsErrorNotInitialized = 3,
  topsErrorInvalidDevicePointer = 17,
  topsErrorInvalidMemcpyDirection = 21,
  topsErrorNoDevice = 100,
  topsErrorInvalidDevice = 101,
  topsErrorPeerAccessUnsupported = 217,
  topsErrorInvalidHandle = 400,
  topsErrorNotReady = 600,
  topsErrorIllegalAddress = 700,
  topsErrorNotSupported = 801,
  topsErrorUnknown = 999
} topsError_t;

typedef enum topsMemcpyKind {
  topsMemcpyHostToHost = 0,
  topsMemcpyHostToDevice = 1,
  topsMemcpyDeviceToHost = 2,
  topsMemcpyDeviceToDevice = 3,
  topsMemcpyDefault = 4
} topsMemcpyKind;

enum topsMemoryType { topsMemoryTypeHost = 0x1, topsMemoryTypeDevice = 0x2 };

typedef struct topsPointerAttribute_t {
  int memoryType;
  int device;
  void* device_pointer;
  void* host_pointer;
  int isManaged;
  unsigned allocationFlags;
} topsPointerAttribute_t;

typedef struct itopsStream_t* topsStream_t;
typedef struct itopsEvent_t* topsEvent_t;

#define topsStreamDefault 0x0
#define topsStreamNonBlocking 0x1
#define topsEventDefault 0x0
#define topsEventBlockingSync 0x1
#define topsEventDisableTiming 0x2
#define topsHostMallocDefault 0x0

topsError_t topsGetDeviceCount(int* count);
topsError_t topsGetDevice(int* device);
topsError_t topsSetDevice(int device);
topsError_t topsDeviceSynchronize(void);
topsError_t topsMalloc(void** ptr, size_t size);
topsError_t topsFree(void* ptr);
topsError_t topsHostMalloc(void** ptr, size_t size, unsigned int flags);
topsError_t topsHostFree(void* ptr);
topsError_t topsMemGetInfo(size_t* free_bytes, size_t* total_bytes);
topsError_t topsMemcpy(void* dst, const void* src, size_t bytes, topsMemcpyKind kind);
topsError_t topsMemcpyAsync(void* dst, const void* src, size_t bytes, topsMemcpyKind kind,
                            topsStream_t stream);
topsError_t topsMemcpyPeer(void* dst, int dstDevice, const void* src, int srcDevice, size_t bytes);
topsError_t topsMemcpyPeerAsync(void* dst, int dstDevice, const void* src, int srcDevice,
                                size_t bytes, topsStream_t stream);
topsError_t topsMemset(void* dst, int value, size_t bytes);
topsError_t topsMemsetAsync(void* dst, int value, size_t bytes, topsStream_t stream);
topsError_t topsPointerGetAttributes(topsPointerAttribute_t* attributes, const void* ptr);
topsError_t topsStreamCreate(topsStream_t* stream);
topsError_t topsStreamCreateWithFlags(topsStream_t* stream, unsigned int flags);
topsError_t topsStreamDestroy(topsStream_t stream);
topsError_t topsStreamQuery(topsStream_t stream);
topsError_t topsStreamSynchronize(topsStream_t stream);
topsError_t topsStreamWaitEvent(topsStream_t stream, topsEvent_t event, unsigned int flags);
topsError_t topsEventCreate(topsEvent_t* event);
topsError_t topsEventCreateWithFlags(topsEvent_t* event, unsigned flags);
topsError_t topsEventRecord(topsEvent_t event, topsStream_t stream);
topsError_t topsEventSynchronize(topsEvent_t event);
topsError_t topsEventQuery(topsEvent_t event);
topsError_t topsEventDestroy(topsEvent_t event);
topsError_t topsEventElapsedTime(float* ms, topsEvent_t start, topsEvent_t stop);
const char* topsGetErrorString(topsError_t error);
topsError_t topsGetLastError(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TOPS_RUNTIME_API_H_ */
