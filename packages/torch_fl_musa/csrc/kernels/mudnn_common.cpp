#include "mudnn_common.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch_fl/kit/kernel_stream.h>
#include <torch_fl/kit/sdk_dtypes.h>
#include <torch_fl/kit/sdk_errors.h>
#include <torch_fl/runtime.h>

#include <memory>
#include <optional>
#include <vector>

namespace tfl_musa {
namespace {

using Type = dnn::Tensor::Type;
constexpr torch_fl::kit::SdkDtype<Type> kDtypes[] = {
    {at::kFloat, Type::FLOAT},   {at::kHalf, Type::HALF},  {at::kBFloat16, Type::BFLOAT16},
    {at::kDouble, Type::DOUBLE}, {at::kLong, Type::INT64}, {at::kInt, Type::INT32},
    {at::kShort, Type::INT16},   {at::kChar, Type::INT8},  {at::kByte, Type::UINT8},
    {at::kBool, Type::BOOL},
};

using Status = dnn::Status;
constexpr torch_fl::kit::SdkError<Status> kStatuses[] = {
    {Status::SUCCESS, "SUCCESS", TFL_OK},
    {Status::INVALID_PARAMETER, "INVALID_PARAMETER", TFL_ERROR_DEVICE},
    {Status::NOT_INITIALIZED, "NOT_INITIALIZED", TFL_ERROR_DEVICE},
    {Status::ALLOC_FAILED, "ALLOC_FAILED", TFL_ERROR_DEVICE},
    {Status::NOT_SUPPORTED, "NOT_SUPPORTED", TFL_ERROR_DEVICE},
    {Status::INTERNAL_ERROR, "INTERNAL_ERROR", TFL_ERROR_DEVICE},
    {Status::ARCH_MISMATCH, "ARCH_MISMATCH", TFL_ERROR_DEVICE},
    {Status::EXECUTION_FAILED, "EXECUTION_FAILED", TFL_ERROR_DEVICE},
};

}  // namespace

dnn::Tensor desc(const Call& c, const at::Tensor& t) {
  const std::optional<Type> type = torch_fl::kit::sdk_dtype(kDtypes, t.scalar_type());
  if (!type)
    c.decline(std::string("muDNN has no tensor type for ") + c10::toString(t.scalar_type()));
  if (t.dim() > dnn::Tensor::kMaxDims)
    c.decline("a rank-" + std::to_string(t.dim()) + " tensor (muDNN describes at most " +
              std::to_string(dnn::Tensor::kMaxDims) + " dims)");
  dnn::Tensor d;
  d.SetType(*type);
  d.SetAddr(t.data_ptr());
  if (t.dim() == 0) {
    const int64_t one = 1;
    d.SetNdInfo(1, &one, &one);
  } else {
    d.SetNdInfo(static_cast<int>(t.dim()), t.sizes().data(), t.strides().data());
  }
  return d;
}

dnn::Handle& handle(const Call& c) {
  // A handle is bound to one device; kept per thread so that binding the stream races nothing.
  thread_local std::vector<std::unique_ptr<dnn::Handle>> handles;
  const auto index = static_cast<size_t>(c.device().index());
  if (handles.size() <= index) handles.resize(index + 1);
  if (!handles[index]) handles[index] = std::make_unique<dnn::Handle>(c.device().index());
  dnn::Handle& h = *handles[index];
  auto* stream = static_cast<musaStream_t>(
      torch_fl::kit::current_native_stream(c.device(), "musa", "musaStream_t"));
  if (h.GetStream() != stream) check(h.SetStream(stream), "Handle::SetStream", c);
  return h;
}

void check(dnn::Status status, const char* fn, const Call& c) {
  if (status == dnn::Status::SUCCESS) return;
  TORCH_CHECK(false, "flagos: muDNN ", fn, " failed for ", c.name(), " on ", c.device(),
              " (vendor musa): status ", static_cast<int>(status), " (",
              torch_fl::kit::sdk_error_name(kStatuses, status, "musa::dnn::Status"), ")");
}

}  // namespace tfl_musa
