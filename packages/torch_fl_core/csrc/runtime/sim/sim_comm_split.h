// comm_split for sim communicators (collective.h's comm_split).
#pragma once

#include "sim_comm.h"

namespace torch_fl::sim {

// This rank's communicator of `color` (ranks ordered by key, then by their
// parent rank), or nullptr for a negative color. A blocking collective of
// every rank of `parent`; throws CommError (the parent then has failed).
CommPtr split_comm(Comm& parent, int color, int key);

}  // namespace torch_fl::sim
