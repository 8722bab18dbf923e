#include "mudnn_common.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch_fl/kit/kernel_stream.h>
#include <torch_fl/runtime.h>

#include <memory>
#include <vector>

namespace tfl_musa {
namespace {

bool mu_type(at::ScalarType t, dnn::Tensor::Type* out) {
  using T = dnn::Tensor::Type;
  switch (t) {
    case at::kFloat:
      *out = T::FLOAT;
      return true;
    case at::kHalf:
      *out = T::HALF;
      return true;
    case at::kBFloat16:
      *out = T::BFLOAT16;
      return true;
    case at::kDouble:
      *out = T::DOUBLE;
      return true;
    case at::kLong:
      *out = T::INT64;
      return true;
    case at::kInt:
      *out = T::INT32;
      return true;
    case at::kShort:
      *out = T::INT16;
      return true;
    case at::kChar:
      *out = T::INT8;
      return true;
    case at::kByte:
      *out = T::UINT8;
      return true;
    case at::kBool:
      *out = T::BOOL;
      return true;
    default:
      return false;
  }
}

const char* status_name(dnn::Status s) {
  switch (s) {
    case dnn::Status::SUCCESS:
      return "SUCCESS";
    case dnn::Status::INVALID_PARAMETER:
      return "INVALID_PARAMETER";
    case dnn::Status::NOT_INITIALIZED:
      return "NOT_INITIALIZED";
    case dnn::Status::ALLOC_FAILED:
      return "ALLOC_FAILED";
    case dnn::Status::NOT_SUPPORTED:
      return "NOT_SUPPORTED";
    case dnn::Status::INTERNAL_ERROR:
      return "INTERNAL_ERROR";
    case dnn::Status::ARCH_MISMATCH:
      return "ARCH_MISMATCH";
    case dnn::Status::EXECUTION_FAILED:
      return "EXECUTION_FAILED";
  }
  return "musa::dnn::Status";
}

}  // namespace

dnn::Tensor desc(const Call& c, const at::Tensor& t) {
  dnn::Tensor::Type type;
  if (!mu_type(t.scalar_type(), &type))
    c.decline(std::string("muDNN has no tensor type for ") + c10::toString(t.scalar_type()));
  if (t.dim() > dnn::Tensor::kMaxDims)
    c.decline("a rank-" + std::to_string(t.dim()) + " tensor (muDNN describes at most " +
              std::to_string(dnn::Tensor::kMaxDims) + " dims)");
  dnn::Tensor d;
  d.SetType(type);
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
              " (vendor musa): status ", static_cast<int>(status), " (", status_name(status), ")");
}

}  // namespace tfl_musa
