// A backend whose kernels a vendor package registered with the dispatcher in
// its own operator namespace (TORCH_LIBRARY(torch_fl_gcu, m) + a PrivateUse1
// impl), each under the aten overload's name and schema:
//
//     aten::add.Tensor  is served by  torch_fl_gcu::add.Tensor
//
// Why a namespace of the vendor's own rather than aten PrivateUse1 kernels:
// those would shadow the router (one kernel per op and key) and core's own
// natives; a namespace keeps the vendor's kernels addressable by name, lets the
// route table choose them per overload and dtype, and needs no symbol of core
// (core's extension hides its symbols; vendors must not link against it).
//
// A kernel may decline a call (throw c10::NotImplementedError, e.g. through
// TORCH_CHECK_NOT_IMPLEMENTED, before it has any effect): core then serves
// that call with its CPU fallback, counted in the census like any fallback.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "router/backend.h"

namespace torch_fl {

std::shared_ptr<Backend> make_library_backend(const std::string& name, const std::string& ns);

// The operator namespaces of the library backends made so far, in order (where
// aten/vendor_copy.cpp looks for a vendor's copy kernel).
std::vector<std::string> library_namespaces();
// How many there are: one atomic load, for callers that cache what they found there.
size_t library_namespace_count();

}  // namespace torch_fl
