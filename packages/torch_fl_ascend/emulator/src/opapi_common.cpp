#include "opapi_common.h"

#include <cstring>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "acl/error_codes/rt_error_codes.h"
#include "emu_internal.h"

namespace emu_op {

at::ScalarType ToAten(aclDataType dt) {
  switch (dt) {
    case ACL_FLOAT:
      return at::kFloat;
    case ACL_FLOAT16:
      return at::kHalf;
    case ACL_BF16:
      return at::kBFloat16;
    case ACL_DOUBLE:
      return at::kDouble;
    case ACL_INT8:
      return at::kChar;
    case ACL_UINT8:
      return at::kByte;
    case ACL_INT16:
      return at::kShort;
    case ACL_INT32:
      return at::kInt;
    case ACL_INT64:
      return at::kLong;
    case ACL_BOOL:
      return at::kBool;
    case ACL_UINT16:
      return at::kUInt16;
    case ACL_UINT32:
      return at::kUInt32;
    case ACL_UINT64:
      return at::kUInt64;
    case ACL_COMPLEX64:
      return at::kComplexFloat;
    case ACL_COMPLEX128:
      return at::kComplexDouble;
    default:
      return at::kFloat;
  }
}

uint64_t ScratchBytes(int64_t elements) {
  const uint64_t n = elements > 0 ? static_cast<uint64_t>(elements) : 1;
  return ((n * 4 + 511) / 512) * 512;  // 512-byte blocks like the real tiling
}

void Ctx::set(int k, const at::Tensor& r) {
  at::Tensor& dst = t.at(k);
  if (!dst.defined()) return;  // optional output left NULL
  TORCH_CHECK(dst.sizes() == r.sizes(), "output shape ", dst.sizes(), " does not match ",
              r.sizes());
  dst.copy_(r);
}

Op::Op(const char* name) : name_(name) {
  injected_ = aclEmuInternalEnter((name_ + "GetWorkspaceSize").c_str());
}

void Op::fail(aclnnStatus st, const std::string& msg) {
  if (status_ != ACLNN_SUCCESS) return;  // keep the first problem
  status_ = st;
  msg_ = msg;
}

void Op::require(bool cond, const std::string& msg) {
  if (!cond) fail(ACLNN_ERR_PARAM_INVALID, msg);
}

static std::string DtypeList(Dtypes d) {
  std::string s;
  for (int i = 0; i < 64; ++i)
    if (d & (Dtypes{1} << i)) {
      if (!s.empty()) s += ", ";
      s += emu_nn::DtypeName(static_cast<aclDataType>(i));
    }
  return s;
}

int Op::in(const char* arg, const aclTensor* t, Dtypes allowed, bool optional) {
  emu_nn::Slot s;
  if (t == nullptr) {
    if (!optional) fail(ACLNN_ERR_PARAM_NULLPTR, std::string(arg) + " is NULL");
  } else {
    s.present = true;
    s.desc = *t;
    const int d = static_cast<int>(t->dtype);
    if (d < 0 || d >= 64 || !(allowed & (Dtypes{1} << d)))
      fail(ACLNN_ERR_PARAM_INVALID, std::string(arg) + " has dtype " + emu_nn::DtypeName(t->dtype) +
                                        ", not supported (supported: " + DtypeList(allowed) + ")");
  }
  slots_.push_back(std::move(s));
  slotNames_.push_back(arg);
  tensorSlot_.push_back(static_cast<int>(slots_.size()) - 1);
  return static_cast<int>(tensorSlot_.size()) - 1;
}

int Op::list(const char* arg, const aclTensorList* l, Dtypes allowed) {
  std::vector<int> idx;
  if (l == nullptr) {
    fail(ACLNN_ERR_PARAM_NULLPTR, std::string(arg) + " is NULL");
  } else if (l->v.size() > emu_nn::kMaxTensorList) {
    fail(ACLNN_ERR_PARAM_INVALID, std::string(arg) + " holds " + std::to_string(l->v.size()) +
                                      " tensors; at most " +
                                      std::to_string(emu_nn::kMaxTensorList) + " are supported");
  } else {
    for (size_t i = 0; i < l->v.size(); ++i) {
      const std::string nm = std::string(arg) + "[" + std::to_string(i) + "]";
      emu_nn::Slot s;
      if (l->v[i] == nullptr) {
        fail(ACLNN_ERR_PARAM_NULLPTR, nm + " is NULL");
      } else {
        s.present = true;
        s.desc = *l->v[i];
        const int d = static_cast<int>(s.desc.dtype);
        if (d < 0 || d >= 64 || !(allowed & (Dtypes{1} << d)))
          fail(ACLNN_ERR_PARAM_INVALID, nm + " has dtype " + emu_nn::DtypeName(s.desc.dtype) +
                                            ", not supported (supported: " + DtypeList(allowed) +
                                            ")");
      }
      slots_.push_back(std::move(s));
      slotNames_.push_back(nm);
      idx.push_back(static_cast<int>(slots_.size()) - 1);
    }
  }
  listSlots_.push_back(std::move(idx));
  return static_cast<int>(listSlots_.size()) - 1;
}

aclDataType Op::dtype(int k) const {
  const emu_nn::Slot& s = slots_.at(tensorSlot_.at(k));
  return s.present ? s.desc.dtype : ACL_DT_UNDEFINED;
}

at::Scalar Op::scalar(const char* arg, const aclScalar* s, bool optional) {
  if (s == nullptr) {
    if (!optional) fail(ACLNN_ERR_PARAM_NULLPTR, std::string(arg) + " is NULL");
    return at::Scalar(0);
  }
  auto get = [&](auto v) {
    std::memcpy(&v, s->value, sizeof(v));
    return v;
  };
  switch (s->dtype) {
    case ACL_FLOAT:
      return at::Scalar(get(float{}));
    case ACL_DOUBLE:
      return at::Scalar(get(double{}));
    case ACL_FLOAT16:
      return at::Scalar(c10::Half(get(uint16_t{}), c10::Half::from_bits()));
    case ACL_BF16:
      return at::Scalar(c10::BFloat16(get(uint16_t{}), c10::BFloat16::from_bits()));
    case ACL_INT8:
      return at::Scalar(static_cast<int64_t>(get(int8_t{})));
    case ACL_UINT8:
      return at::Scalar(static_cast<int64_t>(get(uint8_t{})));
    case ACL_INT16:
      return at::Scalar(static_cast<int64_t>(get(int16_t{})));
    case ACL_INT32:
      return at::Scalar(static_cast<int64_t>(get(int32_t{})));
    case ACL_INT64:
      return at::Scalar(get(int64_t{}));
    case ACL_UINT32:
      return at::Scalar(static_cast<int64_t>(get(uint32_t{})));
    case ACL_BOOL:
      return at::Scalar(get(uint8_t{}) != 0);
    default:
      fail(ACLNN_ERR_PARAM_INVALID,
           std::string(arg) + " has unsupported scalar dtype " + emu_nn::DtypeName(s->dtype));
      return at::Scalar(0);
  }
}

std::vector<int64_t> Op::ints(const char* arg, const aclIntArray* a, bool optional) {
  if (a == nullptr) {
    if (!optional) fail(ACLNN_ERR_PARAM_NULLPTR, std::string(arg) + " is NULL");
    return {};
  }
  return a->v;
}

std::vector<bool> Op::bools(const char* arg, const aclBoolArray* a, bool optional) {
  if (a == nullptr) {
    if (!optional) fail(ACLNN_ERR_PARAM_NULLPTR, std::string(arg) + " is NULL");
    return {};
  }
  return a->v;
}

static at::Tensor HostView(const aclTensor& d, void* base) {
  static char dummy[16];
  auto opts = at::TensorOptions().dtype(ToAten(d.dtype)).device(at::kCPU);
  char* p = base ? static_cast<char*>(base) + d.offset * emu_nn::DtypeSize(d.dtype) : dummy;
  return at::from_blob(p, d.viewDims, d.strides, opts);
}

static at::Tensor MetaView(const aclTensor& d) {
  return at::empty_strided(d.viewDims, d.strides,
                           at::TensorOptions().dtype(ToAten(d.dtype)).device(at::kMeta));
}

// ATen ops without a Meta kernel cannot be shape-checked ahead; they are checked when they run.
static bool NoMetaKernel(const std::string& what) {
  return what.find("Meta") != std::string::npos &&
         (what.find("Could not run") != std::string::npos ||
          what.find("Meta kernel") != std::string::npos ||
          what.find("NotImplemented") != std::string::npos ||
          what.find("not implemented") != std::string::npos);
}

aclnnStatus Op::build(uint64_t* workspaceSize, aclOpExecutor** executor, uint64_t workspace,
                      Compute fn) {
  if (injected_ != 0) return injected_;
  if (workspaceSize == nullptr) fail(ACLNN_ERR_PARAM_NULLPTR, "workspaceSize is NULL");
  if (executor == nullptr) fail(ACLNN_ERR_PARAM_NULLPTR, "executor is NULL");
  if (status_ != ACLNN_SUCCESS) return emu_nn::Fail(name_, status_, msg_);
  if (!aclEmuInternalInitialized())
    return emu_nn::Fail(name_, ACLNN_ERR_RUNTIME_ERROR, "aclInit has not been called");
  const int32_t dev = aclEmuInternalCurrentDevice();
  if (dev < 0)
    return emu_nn::Fail(name_, ACLNN_ERR_RUNTIME_ERROR, "no current device (call aclrtSetDevice)");
  // Every tensor must be device memory of the current device, its whole view inside one live
  // allocation.
  for (size_t i = 0; i < slots_.size(); ++i) {
    const emu_nn::Slot& s = slots_[i];
    if (!s.present) continue;
    int64_t lo = 0, hi = 0;
    emu_nn::ViewExtent(s.desc, &lo, &hi);
    if (hi == lo) continue;
    const size_t es = emu_nn::DtypeSize(s.desc.dtype);
    const char* first = static_cast<const char*>(s.desc.data) + lo * es;
    const size_t bytes = static_cast<size_t>(hi - lo) * es;
    if (aclEmuInternalResolve(dev, first, bytes) == nullptr) {
      const int32_t owner = aclEmuInternalPointerDevice(first, bytes);
      return emu_nn::Fail(
          name_, ACLNN_ERR_PARAM_INVALID,
          slotNames_[i] + (owner >= 0
                               ? " is memory of device " + std::to_string(owner) +
                                     " but the current device is " + std::to_string(dev)
                               : " does not lie within one live device allocation of device " +
                                     std::to_string(dev)));
    }
  }
  // Shape / argument check: the computation on meta tensors.
  auto tensorSlot = tensorSlot_;
  auto listSlots = listSlots_;
  {
    // The emulator's own ATen calls are the "device" at work, not the user's program: no
    // profiler rows, no autocast of the caller's thread.
    EmulatorAtenScope quiet;
    Ctx c;
    c.meta = true;
    for (int si : tensorSlot)
      c.t.push_back(slots_[si].present ? MetaView(slots_[si].desc) : at::Tensor());
    for (const auto& l : listSlots) {
      std::vector<at::Tensor> v;
      for (int si : l) v.push_back(MetaView(slots_[si].desc));
      c.lists.push_back(std::move(v));
    }
    try {
      fn(c);
    } catch (const c10::NotImplementedError&) {
      // no Meta kernel for some op in the computation: checked when it runs
    } catch (const c10::Error& e) {
      const std::string what = e.what_without_backtrace();
      if (!NoMetaKernel(what)) return emu_nn::Fail(name_, ACLNN_ERR_PARAM_INVALID, what);
    } catch (const std::exception& e) {
      return emu_nn::Fail(name_, ACLNN_ERR_PARAM_INVALID, e.what());
    }
  }
  std::vector<emu_nn::Slot> slots = slots_;
  std::string name = name_;
  emu_nn::RunFn run = [fn, slots, tensorSlot, listSlots, name](const std::vector<void*>& host,
                                                               void* /*ws*/, char* msg,
                                                               size_t len) -> int {
    try {
      EmulatorAtenScope quiet;
      Ctx c;
      for (int si : tensorSlot)
        c.t.push_back(slots[si].present ? HostView(slots[si].desc, host[si]) : at::Tensor());
      for (const auto& l : listSlots) {
        std::vector<at::Tensor> v;
        for (int si : l) v.push_back(HostView(slots[si].desc, host[si]));
        c.lists.push_back(std::move(v));
      }
      fn(c);
      return ACL_SUCCESS;
    } catch (const std::exception& e) {
      const auto* ce = dynamic_cast<const c10::Error*>(&e);
      std::snprintf(msg, len, "%s failed on the device: %s", name.c_str(),
                    ce ? ce->what_without_backtrace() : e.what());
      return ACL_ERROR_RT_AICORE_EXCEPTION;
    }
  };
  *workspaceSize = workspace;
  *executor = emu_nn::CreateExecutor(name_, dev, workspace, std::move(slots), std::move(run));
  return ACLNN_SUCCESS;
}

}  // namespace emu_op
