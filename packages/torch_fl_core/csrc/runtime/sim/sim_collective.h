// The sim collective library (collective.h): tfl_collective_get, exported
// from libtorch_fl_sim.so beside tfl_runtime_get. Ranks are processes or
// threads of this machine meeting in shared memory (sim_comm.*); operations
// run as tasks of sim streams (sim_comm_ops.*).
#pragma once

#include <torch_fl/collective.h>

namespace torch_fl::sim {

const tfl_collective_v1* collective_table() noexcept;

}  // namespace torch_fl::sim
