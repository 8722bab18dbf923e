// libnnopbase.so of the CANN emulator: the aclnn parameter objects (aclCreateTensor & friends)
// and the two-phase executor protocol every op of libopapi.so goes through.
#include "nnopbase_emu.h"

#include <cstring>
#include <deque>
#include <mutex>
#include <unordered_set>

#include "acl/error_codes/rt_error_codes.h"
#include "emu_internal.h"

#define NN_API extern "C" __attribute__((visibility("default")))

struct aclOpExecutor {
  std::string op;
  int32_t device = -1;
  uint64_t workspace = 0;
  std::vector<emu_nn::Slot> slots;
  std::shared_ptr<emu_nn::RunFn> run;
  bool repeatable = false;
  uint64_t launches = 0;
};

namespace emu_nn {
namespace {

std::mutex g_mu;
std::unordered_set<const aclOpExecutor*> g_live;
// Spent one-shot executors are kept (contents dropped) for a while, so a second launch of one
// is reported as reuse instead of reading freed memory.
std::deque<aclOpExecutor*> g_spent;
std::unordered_set<const aclOpExecutor*> g_spentSet;
constexpr size_t kSpentKept = 8192;

void Retire(aclOpExecutor* ex) {
  // caller holds g_mu
  g_live.erase(ex);
  ex->slots.clear();
  ex->slots.shrink_to_fit();
  ex->run.reset();
  g_spent.push_back(ex);
  g_spentSet.insert(ex);
  if (g_spent.size() > kSpentKept) {
    aclOpExecutor* old = g_spent.front();
    g_spent.pop_front();
    g_spentSet.erase(old);
    delete old;
  }
}

struct Work {
  std::shared_ptr<RunFn> run;
  std::vector<void*> host;
  void* ws = nullptr;
};

aclError RunWork(void* arg, char* msg, size_t len) {
  auto* w = static_cast<Work*>(arg);
  return (*w->run)(w->host, w->ws, msg, len);
}
void FreeWork(void* arg) { delete static_cast<Work*>(arg); }

bool Injected(const char* name) { return aclEmuInternalEnter(name) != 0; }

}  // namespace

size_t DtypeSize(aclDataType dt) {
  switch (dt) {
    case ACL_BOOL:
    case ACL_INT8:
    case ACL_UINT8:
      return 1;
    case ACL_FLOAT16:
    case ACL_BF16:
    case ACL_INT16:
    case ACL_UINT16:
      return 2;
    case ACL_FLOAT:
    case ACL_INT32:
    case ACL_UINT32:
      return 4;
    case ACL_DOUBLE:
    case ACL_INT64:
    case ACL_UINT64:
    case ACL_COMPLEX64:
      return 8;
    case ACL_COMPLEX128:
      return 16;
    default:
      return 0;
  }
}

const char* DtypeName(aclDataType dt) {
  switch (dt) {
    case ACL_FLOAT:
      return "FLOAT";
    case ACL_FLOAT16:
      return "FLOAT16";
    case ACL_BF16:
      return "BFLOAT16";
    case ACL_DOUBLE:
      return "DOUBLE";
    case ACL_INT8:
      return "INT8";
    case ACL_UINT8:
      return "UINT8";
    case ACL_INT16:
      return "INT16";
    case ACL_UINT16:
      return "UINT16";
    case ACL_INT32:
      return "INT32";
    case ACL_UINT32:
      return "UINT32";
    case ACL_INT64:
      return "INT64";
    case ACL_UINT64:
      return "UINT64";
    case ACL_BOOL:
      return "BOOL";
    case ACL_COMPLEX64:
      return "COMPLEX64";
    case ACL_COMPLEX128:
      return "COMPLEX128";
    default:
      return "UNDEFINED";
  }
}

bool ViewExtent(const aclTensor& t, int64_t* lo, int64_t* hi) {
  if (t.offset < 0) return false;
  int64_t last = t.offset;
  for (size_t i = 0; i < t.viewDims.size(); ++i) {
    if (t.viewDims[i] == 0) {
      *lo = *hi = t.offset;
      return true;
    }
    if (t.strides[i] < 0) return false;
    last += (t.viewDims[i] - 1) * t.strides[i];
  }
  *lo = t.offset;
  *hi = last + 1;
  return true;
}

aclnnStatus Fail(const std::string& op, aclnnStatus status, const std::string& msg) {
  std::string full = op + ": " + msg;
  aclEmuInternalSetErrMsg(full.c_str());
  return status;
}

aclOpExecutor* CreateExecutor(const std::string& op, int32_t device, uint64_t workspace,
                              std::vector<Slot> slots, RunFn run) {
  auto* ex = new aclOpExecutor;
  ex->op = op;
  ex->device = device;
  ex->workspace = workspace;
  ex->slots = std::move(slots);
  ex->run = std::make_shared<RunFn>(std::move(run));
  std::lock_guard<std::mutex> lock(g_mu);
  g_live.insert(ex);
  return ex;
}

aclnnStatus Launch(const char* op, void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                   aclrtStream stream) {
  if (int inj = aclEmuInternalEnter(op)) return inj;
  if (executor == nullptr) return Fail(op, ACLNN_ERR_PARAM_NULLPTR, "executor is NULL");
  std::unique_lock<std::mutex> lock(g_mu);
  if (g_live.count(executor) == 0) {
    if (g_spentSet.count(executor))
      return Fail(op, ACLNN_ERR_PARAM_INVALID,
                  "executor was already launched (an executor from GetWorkspaceSize runs once "
                  "unless aclSetAclOpExecutorRepeatable was called)");
    return Fail(op, ACLNN_ERR_PARAM_INVALID, "executor is not a live aclOpExecutor");
  }
  if (executor->op != op)
    return Fail(op, ACLNN_ERR_PARAM_INVALID,
                "executor was created by " + executor->op + "GetWorkspaceSize");
  const int32_t dev = aclEmuInternalStreamDevice(stream);
  if (dev < 0) return Fail(op, ACLNN_ERR_PARAM_INVALID, "stream is not a live stream");
  if (dev != executor->device)
    return Fail(op, ACLNN_ERR_PARAM_INVALID,
                "stream of device " + std::to_string(dev) +
                    " but the executor was built on device " + std::to_string(executor->device));
  if (workspaceSize < executor->workspace)
    return Fail(op, ACLNN_ERR_PARAM_INVALID,
                "workspaceSize " + std::to_string(workspaceSize) + " is less than the " +
                    std::to_string(executor->workspace) + " bytes GetWorkspaceSize asked for");
  auto* work = new Work;
  work->run = executor->run;
  std::vector<aclEmuRange> ranges;
  if (executor->workspace > 0) {
    if (workspace == nullptr) {
      delete work;
      return Fail(
          op, ACLNN_ERR_PARAM_NULLPTR,
          "workspace is NULL but " + std::to_string(executor->workspace) + " bytes were asked for");
    }
    work->ws = aclEmuInternalResolve(dev, workspace, executor->workspace);
    if (work->ws == nullptr) {
      delete work;
      const int32_t owner = aclEmuInternalPointerDevice(workspace, executor->workspace);
      return Fail(op, ACLNN_ERR_PARAM_INVALID,
                  owner < 0 ? "workspace is not (inside) a live device allocation"
                            : "workspace is memory of device " + std::to_string(owner) +
                                  ", the stream is on device " + std::to_string(dev));
    }
    ranges.push_back({workspace, static_cast<size_t>(executor->workspace)});
  }
  work->host.resize(executor->slots.size(), nullptr);
  for (size_t i = 0; i < executor->slots.size(); ++i) {
    const Slot& s = executor->slots[i];
    if (!s.present) continue;
    int64_t lo = 0, hi = 0;
    ViewExtent(s.desc, &lo, &hi);
    if (hi == lo) continue;
    const size_t es = DtypeSize(s.desc.dtype);
    const char* first = static_cast<const char*>(s.desc.data) + lo * es;
    const size_t bytes = static_cast<size_t>(hi - lo) * es;
    char* host = static_cast<char*>(aclEmuInternalResolve(dev, first, bytes));
    if (host == nullptr) {
      delete work;
      return Fail(op, ACLNN_ERR_PARAM_INVALID,
                  "tensor argument " + std::to_string(i) +
                      " no longer lies in a live allocation of device " + std::to_string(dev));
    }
    work->host[i] = host - lo * static_cast<int64_t>(es);
    ranges.push_back({first, bytes});
  }
  ++executor->launches;
  if (!executor->repeatable) Retire(executor);
  lock.unlock();
  aclError rc =
      aclEmuInternalEnqueue(stream, op, &RunWork, work, &FreeWork, ranges.data(), ranges.size());
  if (rc != ACL_SUCCESS) {
    // The runtime's reason (a capture invalidated earlier, say) goes with the op's failure.
    const char* why = aclGetRecentErrMsg();
    return Fail(op, ACLNN_ERR_RUNTIME_ERROR,
                "queueing on the stream failed with aclError " + std::to_string(rc) +
                    (why ? std::string(": ") + why : std::string()));
  }
  return ACLNN_SUCCESS;
}

}  // namespace emu_nn

using emu_nn::Injected;

NN_API aclTensor* aclCreateTensor(const int64_t* viewDims, uint64_t viewDimsNum,
                                  aclDataType dataType, const int64_t* stride, int64_t offset,
                                  aclFormat format, const int64_t* storageDims,
                                  uint64_t storageDimsNum, void* tensorData) {
  if (Injected("aclCreateTensor")) return nullptr;
  const char* fn = "aclCreateTensor";
  if (viewDimsNum > 0 && viewDims == nullptr) {
    emu_nn::Fail(fn, ACLNN_ERR_PARAM_NULLPTR, "viewDims is NULL");
    return nullptr;
  }
  if (storageDimsNum > 0 && storageDims == nullptr) {
    emu_nn::Fail(fn, ACLNN_ERR_PARAM_NULLPTR, "storageDims is NULL");
    return nullptr;
  }
  if (emu_nn::DtypeSize(dataType) == 0) {
    emu_nn::Fail(fn, ACLNN_ERR_PARAM_INVALID,
                 std::string("unsupported data type ") + emu_nn::DtypeName(dataType));
    return nullptr;
  }
  auto* t = new aclTensor;
  t->viewDims.assign(viewDims, viewDims + viewDimsNum);
  if (stride != nullptr) {
    t->strides.assign(stride, stride + viewDimsNum);
  } else {
    // No strides: the view is contiguous.
    t->strides.resize(viewDimsNum);
    int64_t s = 1;
    for (size_t i = viewDimsNum; i-- > 0;) {
      t->strides[i] = s;
      s *= viewDims[i];
    }
  }
  t->offset = offset;
  t->dtype = dataType;
  t->format = format;
  t->storageDims.assign(storageDims, storageDims + storageDimsNum);
  t->data = tensorData;
  std::string bad;
  for (int64_t d : t->viewDims)
    if (d < 0) bad = "negative view dimension";
  int64_t storage = 1;
  for (int64_t d : t->storageDims) {
    if (d < 0) bad = "negative storage dimension";
    storage *= d;
  }
  int64_t lo = 0, hi = 0;
  if (bad.empty() && !emu_nn::ViewExtent(*t, &lo, &hi)) bad = "negative stride or offset";
  if (bad.empty() && hi > lo && hi > storage)
    bad = "the view reaches element " + std::to_string(hi - 1) + " but the storage holds " +
          std::to_string(storage) + " elements";
  if (bad.empty() && hi > lo && tensorData == nullptr)
    bad = "tensorData is NULL for a non-empty view";
  if (!bad.empty()) {
    delete t;
    emu_nn::Fail(fn, ACLNN_ERR_PARAM_INVALID, bad);
    return nullptr;
  }
  return t;
}

NN_API aclScalar* aclCreateScalar(void* value, aclDataType dataType) {
  if (Injected("aclCreateScalar")) return nullptr;
  const size_t es = emu_nn::DtypeSize(dataType);
  if (value == nullptr || es == 0 || es > sizeof(aclScalar::value)) {
    emu_nn::Fail("aclCreateScalar", value ? ACLNN_ERR_PARAM_INVALID : ACLNN_ERR_PARAM_NULLPTR,
                 value ? "unsupported data type" : "value is NULL");
    return nullptr;
  }
  auto* s = new aclScalar;
  s->dtype = dataType;
  std::memcpy(s->value, value, es);
  return s;
}

template <typename Arr, typename T>
static Arr* MakeArray(const char* fn, const T* value, uint64_t size) {
  if (Injected(fn)) return nullptr;
  if (size > 0 && value == nullptr) {
    emu_nn::Fail(fn, ACLNN_ERR_PARAM_NULLPTR, "value is NULL");
    return nullptr;
  }
  auto* a = new Arr;
  a->v.assign(value, value + size);
  return a;
}

NN_API aclIntArray* aclCreateIntArray(const int64_t* value, uint64_t size) {
  return MakeArray<aclIntArray>("aclCreateIntArray", value, size);
}
NN_API aclFloatArray* aclCreateFloatArray(const float* value, uint64_t size) {
  return MakeArray<aclFloatArray>("aclCreateFloatArray", value, size);
}
NN_API aclBoolArray* aclCreateBoolArray(const bool* value, uint64_t size) {
  return MakeArray<aclBoolArray>("aclCreateBoolArray", value, size);
}
NN_API aclTensorList* aclCreateTensorList(const aclTensor* const* value, uint64_t size) {
  return MakeArray<aclTensorList>("aclCreateTensorList", value, size);
}
NN_API aclScalarList* aclCreateScalarList(const aclScalar* const* value, uint64_t size) {
  return MakeArray<aclScalarList>("aclCreateScalarList", value, size);
}

NN_API aclnnStatus aclDestroyTensor(const aclTensor* tensor) {
  if (int inj = aclEmuInternalEnter("aclDestroyTensor")) return inj;
  delete tensor;
  return ACLNN_SUCCESS;
}
NN_API aclnnStatus aclDestroyScalar(const aclScalar* scalar) {
  delete scalar;
  return ACLNN_SUCCESS;
}
NN_API aclnnStatus aclDestroyIntArray(const aclIntArray* array) {
  delete array;
  return ACLNN_SUCCESS;
}
NN_API aclnnStatus aclDestroyFloatArray(const aclFloatArray* array) {
  delete array;
  return ACLNN_SUCCESS;
}
NN_API aclnnStatus aclDestroyBoolArray(const aclBoolArray* array) {
  delete array;
  return ACLNN_SUCCESS;
}
NN_API aclnnStatus aclDestroyTensorList(const aclTensorList* array) {
  if (array == nullptr) return ACLNN_SUCCESS;
  for (const aclTensor* t : array->v) delete t;
  delete array;
  return ACLNN_SUCCESS;
}
NN_API aclnnStatus aclDestroyScalarList(const aclScalarList* array) {
  if (array == nullptr) return ACLNN_SUCCESS;
  for (const aclScalar* s : array->v) delete s;
  delete array;
  return ACLNN_SUCCESS;
}

static aclnnStatus GetDims(const std::vector<int64_t>& v, int64_t** out, uint64_t* n) {
  if (out == nullptr || n == nullptr) return ACLNN_ERR_PARAM_NULLPTR;
  // The caller frees the copy (CANN hands out a heap array here).
  *out = static_cast<int64_t*>(std::malloc(sizeof(int64_t) * (v.empty() ? 1 : v.size())));
  if (!v.empty()) std::memcpy(*out, v.data(), sizeof(int64_t) * v.size());
  *n = v.size();
  return ACLNN_SUCCESS;
}

NN_API aclnnStatus aclGetViewShape(const aclTensor* t, int64_t** d, uint64_t* n) {
  return t ? GetDims(t->viewDims, d, n) : ACLNN_ERR_PARAM_NULLPTR;
}
NN_API aclnnStatus aclGetStorageShape(const aclTensor* t, int64_t** d, uint64_t* n) {
  return t ? GetDims(t->storageDims, d, n) : ACLNN_ERR_PARAM_NULLPTR;
}
NN_API aclnnStatus aclGetViewStrides(const aclTensor* t, int64_t** d, uint64_t* n) {
  return t ? GetDims(t->strides, d, n) : ACLNN_ERR_PARAM_NULLPTR;
}
NN_API aclnnStatus aclGetViewOffset(const aclTensor* t, int64_t* offset) {
  if (t == nullptr || offset == nullptr) return ACLNN_ERR_PARAM_NULLPTR;
  *offset = t->offset;
  return ACLNN_SUCCESS;
}
NN_API aclnnStatus aclGetFormat(const aclTensor* t, aclFormat* format) {
  if (t == nullptr || format == nullptr) return ACLNN_ERR_PARAM_NULLPTR;
  *format = t->format;
  return ACLNN_SUCCESS;
}
NN_API aclnnStatus aclGetDataType(const aclTensor* t, aclDataType* dataType) {
  if (t == nullptr || dataType == nullptr) return ACLNN_ERR_PARAM_NULLPTR;
  *dataType = t->dtype;
  return ACLNN_SUCCESS;
}
template <typename A>
static aclnnStatus GetSize(const A* a, uint64_t* size) {
  if (a == nullptr || size == nullptr) return ACLNN_ERR_PARAM_NULLPTR;
  *size = a->v.size();
  return ACLNN_SUCCESS;
}
NN_API aclnnStatus aclGetIntArraySize(const aclIntArray* a, uint64_t* s) { return GetSize(a, s); }
NN_API aclnnStatus aclGetFloatArraySize(const aclFloatArray* a, uint64_t* s) {
  return GetSize(a, s);
}
NN_API aclnnStatus aclGetBoolArraySize(const aclBoolArray* a, uint64_t* s) { return GetSize(a, s); }
NN_API aclnnStatus aclGetTensorListSize(const aclTensorList* a, uint64_t* s) {
  return GetSize(a, s);
}
NN_API aclnnStatus aclGetScalarListSize(const aclScalarList* a, uint64_t* s) {
  return GetSize(a, s);
}

NN_API aclnnStatus aclSetAclOpExecutorRepeatable(aclOpExecutor* executor) {
  if (int inj = aclEmuInternalEnter("aclSetAclOpExecutorRepeatable")) return inj;
  if (executor == nullptr) return ACLNN_ERR_PARAM_NULLPTR;
  std::lock_guard<std::mutex> lock(emu_nn::g_mu);
  if (emu_nn::g_live.count(executor) == 0)
    return emu_nn::Fail("aclSetAclOpExecutorRepeatable", ACLNN_ERR_PARAM_INVALID,
                        "executor is not a live aclOpExecutor (already launched or destroyed)");
  if (executor->launches > 0)
    return emu_nn::Fail("aclSetAclOpExecutorRepeatable", ACLNN_ERR_PARAM_INVALID,
                        "executor must be made repeatable before its first launch");
  executor->repeatable = true;
  return ACLNN_SUCCESS;
}

NN_API aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor* executor) {
  if (int inj = aclEmuInternalEnter("aclDestroyAclOpExecutor")) return inj;
  if (executor == nullptr) return ACLNN_ERR_PARAM_NULLPTR;
  std::lock_guard<std::mutex> lock(emu_nn::g_mu);
  if (emu_nn::g_live.count(executor) == 0)
    return emu_nn::Fail("aclDestroyAclOpExecutor", ACLNN_ERR_PARAM_INVALID,
                        "executor is not a live aclOpExecutor");
  // Queued work holds its own reference to the computation, so destroying after launch is safe.
  emu_nn::Retire(executor);
  return ACLNN_SUCCESS;
}

NN_API aclnnStatus aclSetRawTensorAddr(aclTensor* tensor, void* addr) {
  if (tensor == nullptr) return ACLNN_ERR_PARAM_NULLPTR;
  tensor->data = addr;
  return ACLNN_SUCCESS;
}
NN_API aclnnStatus aclGetRawTensorAddr(const aclTensor* tensor, void** addr) {
  if (tensor == nullptr || addr == nullptr) return ACLNN_ERR_PARAM_NULLPTR;
  *addr = tensor->data;
  return ACLNN_SUCCESS;
}

NN_API aclnnStatus aclnnInit(const char* /*configPath*/) {
  if (int inj = aclEmuInternalEnter("aclnnInit")) return inj;
  return ACLNN_SUCCESS;
}
NN_API aclnnStatus aclnnFinalize() { return ACLNN_SUCCESS; }
