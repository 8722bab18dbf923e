// Backends whose kernels are Python callables (how FlagGems plugs in).
#pragma once

#include <Python.h>
#include <c10/core/DeviceType.h>

#include <optional>
#include <string>

namespace torch_fl {

// Registers backend `name`. The router calls trampoline(op_full_name, args)
// with the GIL held, args converted from the dispatcher stack by PyTorch's own
// IValue<->Python converters, and converts the result back with the schema's
// return types. has_kernel(op_full_name) -> bool answers route validation.
// Both are new references kept for the life of the process.
// With `view_type`, flagos tensor arguments reach Python as alias views of
// that device type, results of that type are adopted back into flagos, and
// out=/in-place returns are the caller's flagos tensors (a fresh result is
// copied into them): the views are made here, not by Python hooks, because
// each hook call through torch.ops costs microseconds per tensor.
// direct(op_full_name) -> (fn, npos, kw_indices, kwnames) | None (optional,
// with `view_type` only), asked once per operator: the router then calls fn
// itself (vectorcall) instead of the trampoline, saving its Python frames.
void register_python_backend(const std::string& name, PyObject* trampoline, PyObject* has_kernel,
                             PyObject* direct = nullptr,
                             std::optional<c10::DeviceType> view_type = std::nullopt);

}  // namespace torch_fl
