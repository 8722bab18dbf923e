// The sparse kernels' DispatchStubs for flagos (sparse_stubs.cpp).
#pragma once

namespace torch_fl {

// Sets the flagos entry of each sparse stub this torch exports; called once when _C loads.
void register_sparse_stubs();

}  // namespace torch_fl
