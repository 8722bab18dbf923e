// Backends whose kernels are Python callables (how FlagGems plugs in).
#pragma once

#include <Python.h>

#include <string>

namespace torch_fl {

// Registers backend `name`. The router calls trampoline(op_full_name, args)
// with the GIL held, args converted from the dispatcher stack by PyTorch's own
// IValue<->Python converters, and converts the result back with the schema's
// return types. has_kernel(op_full_name) -> bool answers route validation.
// Both are new references kept for the life of the process.
void register_python_backend(const std::string& name, PyObject* trampoline, PyObject* has_kernel);

}  // namespace torch_fl
