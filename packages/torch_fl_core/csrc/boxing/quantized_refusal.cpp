#include "boxing/quantized_refusal.h"

#include <c10/util/Exception.h>

#include "glue/runtime_access.h"

namespace torch_fl {

void refuse_quantized(const std::string& what, const std::string& device) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, "flagos: ", what, " on ", device, " (runtime '", runtime_name(),
      "'): flagos has no quantized tensors. PyTorch deprecates them (quantize_per_tensor and "
      "friends warn that they will be removed); quantize and run quantized operators on the "
      "CPU (tensor.cpu() before quantizing), or keep the model in floating point on flagos.");
}

}  // namespace torch_fl
