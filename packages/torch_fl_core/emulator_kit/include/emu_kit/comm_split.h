// comm_split for sim communicators (collective.h's comm_split).
#pragma once

#include "emu_kit/comm.h"

namespace emu_kit {

// This rank's communicator of `color` (ranks ordered by key, then by their
// parent rank), or nullptr for a negative color. A blocking collective of
// every rank of `parent`; throws CommError (the parent then has failed).
CommPtr split_comm(Comm& parent, int color, int key);

}  // namespace emu_kit
