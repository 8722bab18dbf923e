// The vendor backend as a Python object of torch's own c10d `Backend` type.
// torch binds c10d with pybind11; this translation unit is the only one of
// core that includes pybind11 (the rest of the module is nanobind), so the
// object it makes is one torch.distributed accepts as any other backend.
#pragma once

#include <Python.h>

#include <cstdint>
#include <string>

namespace torch_fl::distributed {

// A new reference to a torch.distributed Backend over the collective library
// at `library_path`; `store` is a torch.distributed.Store. Raises a Python
// exception (returns nullptr) on failure.
PyObject* make_vendor_backend_object(PyObject* store, int rank, int size, double timeout_s,
                                     const std::string& library_path, const std::string& vendor);
// Library calls made by the vendor backend `backend` (-1: not one).
int64_t vendor_backend_library_calls(PyObject* backend);

}  // namespace torch_fl::distributed
