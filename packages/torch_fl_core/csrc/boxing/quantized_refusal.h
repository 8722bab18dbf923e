// flagos has no quantized tensors (quantized_refusal.cpp).
#pragma once

#include <string>

namespace torch_fl {

// Throws NotImplementedError: `what` ("aten::dequantize.self on a quantized tensor", "a
// quantized result of aten::quantize_per_tensor") cannot run on `device` ("flagos:0").
[[noreturn]] void refuse_quantized(const std::string& what, const std::string& device);

}  // namespace torch_fl
