// torch.accelerator.Graph for flagos: registers flagos's graph implementation
// in ATen's GraphImplRegistry (torch >= 2.12). Call after PrivateUse1 is
// renamed; false where this torch has no such registry.
#pragma once

namespace torch_fl {

bool register_accelerator_graph();

}  // namespace torch_fl
