// The MUSA runtime: the framework's CUDA-style runtime with worker streams.
#include "musa_state.h"

namespace musa_emu {

namespace {
// CUDA's names and behaviour throughout, under the "musa" prefix.
emu_kit::CudaRuntime* make() {
  emu_kit::CudaConfig c("musa", "MUSA emulator", emu_kit::Stream::Mode::worker);
  // muDNN's operator classes (mudnn.h) count and fail through it too: "Binary::Run".
  c.ledger_prefix += "|Handle::|Unary::|Binary::|Ternary::|Reduce::|MatMul::|BatchMatMul::";
  c.ledger_prefix += "|Softmax::|Fill::|Concat::";
  c.ledger_prefix += "|mccl";  // libmccl.so counts through it too
  c.graphs = true;             // CUDA's stream capture and graphs (musa_graph.cpp)
  return new emu_kit::CudaRuntimeOf<MUstream_st, MUevent_st>(std::move(c));
}
}  // namespace

emu_kit::CudaRuntime& R() { return emu_kit::cuda_runtime(make); }

}  // namespace musa_emu
