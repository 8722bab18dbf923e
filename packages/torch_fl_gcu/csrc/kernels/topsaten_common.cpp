#include "topsaten_common.h"

#include <ATen/WrapDimUtils.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch_fl/kit/kernel_stream.h>
#include <torch_fl/kit/sdk_dtypes.h>
#include <torch_fl/kit/sdk_errors.h>
#include <torch_fl/runtime.h>

#include <mutex>
#include <optional>
#include <sstream>
#include <string>

namespace tfl_gcu {

namespace {
// int64 and float64 exist, but every topsaten op answers NOT_SUPPORT for them.
constexpr torch_fl::kit::SdkDtype<topsaten::topsatenDataType_t> kDtypes[] = {
    {at::kFloat, topsaten::TOPSATEN_DATA_FP32},    {at::kHalf, topsaten::TOPSATEN_DATA_FP16},
    {at::kBFloat16, topsaten::TOPSATEN_DATA_BF16}, {at::kInt, topsaten::TOPSATEN_DATA_I32},
    {at::kShort, topsaten::TOPSATEN_DATA_I16},     {at::kChar, topsaten::TOPSATEN_DATA_I8},
    {at::kByte, topsaten::TOPSATEN_DATA_U8},       {at::kBool, topsaten::TOPSATEN_DATA_PRED},
    {at::kLong, topsaten::TOPSATEN_DATA_I64},      {at::kDouble, topsaten::TOPSATEN_DATA_F64},
};
}  // namespace

topsaten::topsatenDataType_t tops_dtype(at::ScalarType t) {
  return torch_fl::kit::sdk_dtype(kDtypes, t).value_or(topsaten::TOPSATEN_DATA_NONE);
}

const torch_fl::kit::DtypeSet kArithmetic{at::kFloat, at::kHalf, at::kBFloat16, at::kInt};
const torch_fl::kit::DtypeSet kFloating{at::kFloat, at::kHalf, at::kBFloat16};
const torch_fl::kit::DtypeSet kStorage{at::kFloat, at::kHalf, at::kBFloat16, at::kInt,
                                       at::kShort, at::kChar, at::kByte,     at::kBool};

Desc::Desc(const at::Tensor& t) {
  TORCH_INTERNAL_ASSERT(t.is_contiguous() && t.device().is_privateuseone());
  if (t.dim() == 0) {
    dims_ = {1};  // topsaten rejects rank 0
    strides_ = {1};
  } else {
    dims_ = t.sizes().vec();
    strides_ = t.strides().vec();
  }
  t_ = topsaten::topsatenTensor(
      topsaten::topsatenSize_t(dims_.data(), static_cast<int64_t>(dims_.size())),
      topsaten::topsatenSize_t(strides_.data(), static_cast<int64_t>(strides_.size())),
      tops_dtype(t.scalar_type()), t.data_ptr());
}

Desc::Desc() = default;

topsaten::topsatenScalar_t tops_scalar(const at::Scalar& s) {
  topsaten::topsatenScalar_t r{};
  if (s.isFloatingPoint()) {
    r.dtype = topsaten::TOPSATEN_DATA_F64;
    r.fval = s.toDouble();
  } else if (s.isBoolean()) {
    r.dtype = topsaten::TOPSATEN_DATA_I64;
    r.ival = s.toBool() ? 1 : 0;
  } else {
    TORCH_CHECK(!s.isComplex(), "gcu: complex scalars have no topsaten form");
    r.dtype = topsaten::TOPSATEN_DATA_I64;
    r.ival = s.toLong();
  }
  return r;
}

topsaten::topsatenSize_t tops_size(const std::vector<int64_t>& v) {
  return topsaten::topsatenSize_t(v.data(), static_cast<int64_t>(v.size()));
}

topsStream_t current_stream(c10::Device device) {
  return static_cast<topsStream_t>(
      torch_fl::kit::current_native_stream(device, "gcu", "topsrt stream"));
}

namespace {
void* malloc_cb(size_t n) {
  void* p = nullptr;
  return topsMalloc(&p, n) == topsSuccess ? p : nullptr;
}
void free_cb(void* p) { (void)topsFree(p); }
void* malloc_async_cb(size_t n, topsStream_t) { return malloc_cb(n); }
void free_async_cb(void* p, topsStream_t) { free_cb(p); }
}  // namespace

void ensure_init() {
  static std::once_flag once;
  static topsaten::topsatenStatus_t status = topsaten::TOPSATEN_STATUS_SUCCESS;
  static const char* failed = "";
  std::call_once(once, [] {
    using namespace topsaten;
    // The SDK wants its scratch allocator before init.
    if ((status = topsatenMallocFuncRegister(&malloc_cb))) {
      failed = "topsatenMallocFuncRegister";
      return;
    }
    if ((status = topsatenFreeFuncRegister(&free_cb))) {
      failed = "topsatenFreeFuncRegister";
      return;
    }
    if ((status = topsatenMallocAsyncFuncRegister(&malloc_async_cb))) {
      failed = "topsatenMallocAsyncFuncRegister";
      return;
    }
    if ((status = topsatenFreeAsyncFuncRegister(&free_async_cb))) {
      failed = "topsatenFreeAsyncFuncRegister";
      return;
    }
    if ((status = topsatenInit())) failed = "topsatenInit";
  });
  TORCH_CHECK(status == topsaten::TOPSATEN_STATUS_SUCCESS, "gcu: ", failed,
              " failed: ", status_name(status), " (vendor gcu)");
}

const char* status_name(topsaten::topsatenStatus_t s) {
  using namespace topsaten;
  static constexpr torch_fl::kit::SdkError<topsatenStatus_t> kStatuses[] = {
      TFL_KIT_SDK_NAME(TOPSATEN_STATUS_SUCCESS),
      TFL_KIT_SDK_NAME(TOPSATEN_STATUS_ALLOC_FAILED),
      TFL_KIT_SDK_NAME(TOPSATEN_STATUS_BAD_PARAM),
      TFL_KIT_SDK_NAME(TOPSATEN_STATUS_NOT_SUPPORT),
      TFL_KIT_SDK_NAME(TOPSATEN_STATUS_INTERNAL_ERROR),
      TFL_KIT_SDK_NAME(TOPSATEN_STATUS_RUNTIME_ERROR),
      TFL_KIT_SDK_NAME(TOPSATEN_STATUS_EXECUTE_ERROR),
  };
  return torch_fl::kit::sdk_error_name(kStatuses, s, "TOPSATEN_STATUS_<unknown>");
}

namespace {

// The first index of `index` outside [-size, size), as CPU's message words it.
std::optional<std::string> out_of_bounds(const at::Tensor& index, int64_t dim, int64_t size) {
  if (!index.defined() || index.numel() == 0 || !at::isIntegralType(index.scalar_type(), false)) {
    return std::nullopt;
  }
  const at::Tensor host = index.to(at::kCPU).to(at::kLong).contiguous().reshape(-1);
  const int64_t* v = host.const_data_ptr<int64_t>();
  for (int64_t i = 0; i < host.numel(); ++i) {
    if (v[i] < -size || v[i] >= size) {
      return "index " + std::to_string(v[i]) + " is out of bounds for dimension " +
             std::to_string(dim) + " with size " + std::to_string(size);
    }
  }
  return std::nullopt;
}

// topsaten reports an index out of range only as an execution error: for the
// indexing kernels, the index and size that caused it (read back on the host,
// on this error path only).
std::optional<std::string> index_error(const Call& c) {
  try {
    if (!c.has("self")) return std::nullopt;
    const at::Tensor self = c.tensor("self");
    const int64_t rank = std::max<int64_t>(self.dim(), 1);
    auto size_of = [&](int64_t d) { return self.dim() == 0 ? int64_t{1} : self.size(d); };
    if (c.has("index") && c.has("dim")) {
      const int64_t dim = at::maybe_wrap_dim(c.int_("dim"), rank);
      return out_of_bounds(c.tensor("index"), dim, size_of(dim));
    }
    if (c.has("indices")) {
      const auto list = c.arg("indices").toOptionalTensorList().vec();
      for (size_t d = 0; d < list.size() && static_cast<int64_t>(d) < rank; ++d) {
        if (!list[d]) continue;
        const int64_t dim = static_cast<int64_t>(d);
        if (auto e = out_of_bounds(*list[d], dim, size_of(dim))) return e;
      }
    }
  } catch (const std::exception&) {
    // The plain status below says what failed.
  }
  return std::nullopt;
}

}  // namespace

void check(topsaten::topsatenStatus_t status, const char* tops_fn, const Call& c) {
  if (status == topsaten::TOPSATEN_STATUS_SUCCESS) return;
  if (status == topsaten::TOPSATEN_STATUS_EXECUTE_ERROR) {
    if (auto e = index_error(c)) {
      TORCH_CHECK_INDEX(false, *e, " (", c.name(), " on ", c.device(), ": ", tops_fn, " returned ",
                        status_name(status), ", vendor gcu)");
    }
  }
  TORCH_CHECK(false, "flagos: ", tops_fn, " failed for ", c.name(), " on ", c.device(), ": ",
              status_name(status), " (vendor gcu, libtopsaten)");
}

}  // namespace tfl_gcu
