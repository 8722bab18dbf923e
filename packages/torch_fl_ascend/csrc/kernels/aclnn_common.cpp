#include "aclnn_common.h"

#include <c10/core/Event.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch_fl/kit/kernel_stream.h>
#include <torch_fl/kit/sdk_dtypes.h>
#include <torch_fl/kit/sdk_errors.h>
#include <torch_fl/runtime.h>

#include <string>

namespace tfl_ascend {

namespace {
constexpr torch_fl::kit::SdkDtype<aclDataType> kDtypes[] = {
    {at::kFloat, ACL_FLOAT},
    {at::kHalf, ACL_FLOAT16},
    {at::kBFloat16, ACL_BF16},
    {at::kDouble, ACL_DOUBLE},
    {at::kLong, ACL_INT64},
    {at::kInt, ACL_INT32},
    {at::kShort, ACL_INT16},
    {at::kChar, ACL_INT8},
    {at::kByte, ACL_UINT8},
    {at::kBool, ACL_BOOL},
    {at::kUInt16, ACL_UINT16},
    {at::kUInt32, ACL_UINT32},
    {at::kUInt64, ACL_UINT64},
    {at::kComplexFloat, ACL_COMPLEX64},
    {at::kComplexDouble, ACL_COMPLEX128},
};
}  // namespace

aclDataType acl_dtype(at::ScalarType t) {
  return torch_fl::kit::sdk_dtype(kDtypes, t).value_or(ACL_DT_UNDEFINED);
}

namespace {
std::string recent_error() {
  const char* m = aclGetRecentErrMsg();
  return (m && *m) ? std::string(m) : std::string("(aclGetRecentErrMsg: no message)");
}
}  // namespace

Tensor::Tensor(const at::Tensor& t) {
  TORCH_INTERNAL_ASSERT(t.device().is_privateuseone(), "ascend kernel: a ", t.device(),
                        " tensor reached an aclTensor");
  const aclDataType dt = acl_dtype(t.scalar_type());
  TORCH_CHECK(dt != ACL_DT_UNDEFINED, "ascend: dtype ", t.scalar_type(), " has no ACLNN form");
  const std::vector<int64_t> dims = t.sizes().vec(), strides = t.strides().vec();
  // The view over its whole storage: ACLNN reads sizes, strides and the offset as they are.
  const c10::Storage& storage = t.storage();
  const int64_t item = static_cast<int64_t>(t.element_size());
  const int64_t storage_len = static_cast<int64_t>(storage.nbytes()) / item;
  void* data = storage.nbytes() > 0 ? const_cast<void*>(storage.data()) : nullptr;
  own(aclCreateTensor(dims.data(), dims.size(), dt, strides.data(), t.storage_offset(),
                      ACL_FORMAT_ND, &storage_len, 1, data));
  TORCH_CHECK(get() != nullptr, "ascend: aclCreateTensor failed for a ", t.scalar_type(),
              " tensor of ", t.sizes(), " (strides ", t.strides(), ", offset ", t.storage_offset(),
              ") on ", t.device(), ": ", recent_error(), " (vendor ascend)");
}

Scalar::Scalar(const at::Scalar& s, at::ScalarType like) {
  TORCH_CHECK(!s.isComplex(), "ascend: complex scalars have no ACLNN form");
  if (at::isFloatingType(like)) {
    // Reduced-precision ops take their scalars in float32, as PyTorch's opmath does.
    if (like == at::kDouble) {
      double v = s.toDouble();
      own(aclCreateScalar(&v, ACL_DOUBLE));
    } else {
      float v = s.toFloat();
      own(aclCreateScalar(&v, ACL_FLOAT));
    }
  } else if (like == at::kBool) {
    bool v = s.toBool();
    own(aclCreateScalar(&v, ACL_BOOL));
  } else if (s.isFloatingPoint()) {
    float v = s.toFloat();
    own(aclCreateScalar(&v, ACL_FLOAT));
  } else {
    int64_t v = s.toLong();
    own(aclCreateScalar(&v, ACL_INT64));
  }
  TORCH_CHECK(get() != nullptr, "ascend: aclCreateScalar failed: ", recent_error(),
              " (vendor ascend)");
}

IntArray::IntArray(const std::vector<int64_t>& v) {
  own(aclCreateIntArray(v.data(), v.size()));
  TORCH_CHECK(get() != nullptr, "ascend: aclCreateIntArray failed: ", recent_error(),
              " (vendor ascend)");
}

BoolArray::BoolArray(const std::vector<bool>& v) {
  std::unique_ptr<bool[]> flat(new bool[v.size() + 1]);  // std::vector<bool> is packed
  for (size_t i = 0; i < v.size(); ++i) flat[i] = v[i];
  own(aclCreateBoolArray(flat.get(), v.size()));
  TORCH_CHECK(get() != nullptr, "ascend: aclCreateBoolArray failed: ", recent_error(),
              " (vendor ascend)");
}

TensorList::TensorList(const std::vector<at::Tensor>& ts) {
  TORCH_INTERNAL_ASSERT(ts.size() <= kMaxTensorList, "ascend kernel: a list of ", ts.size(),
                        " tensors reached aclCreateTensorList unsplit");
  std::vector<Tensor> owned;
  owned.reserve(ts.size());
  for (const at::Tensor& t : ts) owned.emplace_back(t);
  std::vector<const aclTensor*> raw;
  for (const Tensor& t : owned) raw.push_back(t.get());
  own(aclCreateTensorList(raw.data(), raw.size()));
  TORCH_CHECK(get() != nullptr, "ascend: aclCreateTensorList failed for ", ts.size(),
              " tensors: ", recent_error(), " (vendor ascend)");
  for (Tensor& t : owned) t.release();  // the list owns its tensors now
}

aclrtStream current_stream(c10::Device device) {
  return static_cast<aclrtStream>(
      torch_fl::kit::current_native_stream(device, "ascend", "aclrtStream"));
}

namespace {
constexpr torch_fl::kit::SdkError<aclnnStatus> kStatuses[] = {
    TFL_KIT_SDK_NAME(ACLNN_ERR_PARAM_NULLPTR),
    TFL_KIT_SDK_NAME(ACLNN_ERR_PARAM_INVALID),
    TFL_KIT_SDK_NAME(ACLNN_ERR_RUNTIME_ERROR),
    TFL_KIT_SDK_NAME(ACLNN_ERR_INNER),
    TFL_KIT_SDK_NAME(ACLNN_ERR_INNER_NULLPTR),
    TFL_KIT_SDK_NAME(ACLNN_ERR_INNER_INFERSHAPE_ERROR),
    TFL_KIT_SDK_NAME(ACLNN_ERR_INNER_TILING_ERROR),
    TFL_KIT_SDK_NAME(ACLNN_ERR_INNER_FIND_KERNEL_ERROR),
};
}  // namespace

void check(aclnnStatus status, const std::string& aclnn_fn, const Call& c) {
  if (status == ACLNN_SUCCESS) return;
  TORCH_CHECK(false, "flagos: ", aclnn_fn, " failed for ", c.name(), " on ", c.device(),
              " (vendor ascend): status ", status, " (",
              torch_fl::kit::sdk_error_name(kStatuses, status, "aclnnStatus"),
              "): ", recent_error());
}

void execute(const Call& c, RunFn run, const char* aclnn, uint64_t size, aclOpExecutor* executor) {
  // The workspace comes from the flagos caching allocator on the current stream, the stream the
  // op runs on, and is released when this returns, with the op still queued: its block goes back
  // to that stream's pool, so whatever reuses it is ordered behind the op on the same stream (as
  // for any temporary), and the allocator synchronizes the device before it hands a cached
  // segment back to aclrtFree (empty_cache), so the memory outlives the op.
  at::Tensor ws;
  void* ptr = nullptr;
  if (size > 0) {
    ws = at::empty({static_cast<int64_t>(size)},
                   at::TensorOptions().dtype(at::kByte).device(c.device()));
    ptr = ws.data_ptr();
  }
  check(run(ptr, size, executor, current_stream(c.device())), aclnn, c);
}

}  // namespace tfl_ascend
