// Internals shared by libnnopbase.so and libopapi.so (not CANN API): the layout of the aclnn
// parameter objects and the executor protocol the ops are built on.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "aclnn/aclnn_base.h"

#define EMU_NN_EXPORT __attribute__((visibility("default")))

struct aclTensor {
  std::vector<int64_t> viewDims;
  std::vector<int64_t> strides;  // elements
  int64_t offset = 0;            // elements from `data`
  aclDataType dtype = ACL_FLOAT;
  aclFormat format = ACL_FORMAT_ND;
  std::vector<int64_t> storageDims;
  void* data = nullptr;  // device address of the storage
};

struct aclScalar {
  aclDataType dtype = ACL_FLOAT;
  alignas(8) unsigned char value[16] = {};
};

struct aclIntArray {
  std::vector<int64_t> v;
};
struct aclFloatArray {
  std::vector<float> v;
};
struct aclBoolArray {
  std::vector<bool> v;
};
struct aclTensorList {
  std::vector<const aclTensor*> v;  // owned
};
struct aclScalarList {
  std::vector<const aclScalar*> v;  // owned
};

namespace emu_nn {

// The most tensors one aclTensorList may carry into an op.
constexpr size_t kMaxTensorList = 50;

// Element size in bytes; 0 for types the emulator does not model.
EMU_NN_EXPORT size_t DtypeSize(aclDataType dt);
EMU_NN_EXPORT const char* DtypeName(aclDataType dt);

// Element range [lo, hi) of a view relative to `data` (hi == lo for an empty view). False for
// negative strides or offset.
EMU_NN_EXPORT bool ViewExtent(const aclTensor& t, int64_t* lo, int64_t* hi);

// One tensor argument as the executor snapshots it (present == false: an optional left NULL).
struct Slot {
  bool present = false;
  aclTensor desc;
};

// Runs the op on host memory: hostData[i] is the host address of slot i's `data` (nullptr for
// absent or empty slots), ws the host address of the workspace. Returns an aclError; on
// failure writes a message into msg.
using RunFn =
    std::function<int(const std::vector<void*>& hostData, void* ws, char* msg, size_t msgLen)>;

// The executor aclnnXGetWorkspaceSize returns.
EMU_NN_EXPORT aclOpExecutor* CreateExecutor(const std::string& op, int32_t device,
                                            uint64_t workspace, std::vector<Slot> slots, RunFn run);

// aclnnX(workspace, workspaceSize, executor, stream): checks the two-phase protocol and queues
// the executor's work on the stream.
EMU_NN_EXPORT aclnnStatus Launch(const char* op, void* workspace, uint64_t workspaceSize,
                                 aclOpExecutor* executor, aclrtStream stream);

// Sets the calling thread's aclGetRecentErrMsg to "<op>: <msg>" and returns status.
EMU_NN_EXPORT aclnnStatus Fail(const std::string& op, aclnnStatus status, const std::string& msg);

}  // namespace emu_nn
