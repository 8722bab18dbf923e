// MSE loss and its backward: muDNN has no loss operator, so they are the kit's compositions of
// muDNN-backed operators. Their schemas are defined by the generator (tools/gen_kernels.py,
// HANDWRITTEN), only when the muDNN functions they use exist.
#include <torch_fl/kit/loss_composed.h>

TFL_KIT_COMPOSED_MSE_LOSS(torch_fl_musa)
