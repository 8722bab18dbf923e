// GradScaler's two kernels: topsaten has no fused non-finite-check/unscale or scale-update
// kernel, so they are the kit's compositions of topsaten-backed operators. Their schemas are
// defined by the generator (tools/gen_kernels.py, HANDWRITTEN), only when the topsaten functions
// they use exist.
#include <torch_fl/kit/grad_scaler_composed.h>

TFL_KIT_COMPOSED_GRAD_SCALER(torch_fl_gcu)
