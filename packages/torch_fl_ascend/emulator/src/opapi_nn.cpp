// Normalisations, indexing, tensor lists, convolution, dropout and the AMP ops.
#include <cmath>
#include <cstring>

#include <ATen/CPUGeneratorImpl.h>

#include "opapi_common.h"

#include "aclnnop/aclnn_layer_norm.h"
#include "aclnnop/aclnn_layer_norm_backward.h"
#include "aclnnop/aclnn_rms_norm.h"
#include "aclnnop/aclnn_embedding.h"
#include "aclnnop/aclnn_embedding_dense_backward.h"
#include "aclnnop/aclnn_index_select.h"
#include "aclnnop/aclnn_gather.h"
#include "aclnnop/aclnn_scatter.h"
#include "aclnnop/aclnn_scatter_add.h"
#include "aclnnop/aclnn_cat.h"
#include "aclnnop/aclnn_stack.h"
#include "aclnnop/aclnn_arange.h"
#include "aclnnop/aclnn_convolution.h"
#include "aclnnop/aclnn_convolution_backward.h"
#include "aclnnop/aclnn_dropout.h"
#include "aclnnop/aclnn_dropout_gen_mask.h"
#include "aclnnop/aclnn_dropout_gen_mask_v2.h"
#include "aclnnop/aclnn_dropout_gen_mask_v2_tensor.h"
#include "aclnnop/aclnn_dropout_do_mask.h"
#include "aclnnop/aclnn_foreach_non_finite_check_and_unscale.h"
#include "aclnnop/aclnn_amp_update_scale.h"

using namespace emu_op;

namespace {

int64_t Numel(const aclTensor* t) {
  if (t == nullptr) return 0;
  int64_t n = 1;
  for (int64_t d : t->viewDims) n *= d;
  return n;
}

// Reduced-precision inputs are computed in FLOAT (CPU ATen lacks some FLOAT16 kernels); the
// results are converted back by the copy into the output.
at::Tensor F32(const at::Tensor& t) {
  if (!t.defined()) return t;
  return t.scalar_type() == at::kFloat ? t : t.to(at::kFloat);
}

}  // namespace

OPAPI_EXPORT aclnnStatus aclnnLayerNormGetWorkspaceSize(
    const aclTensor* input, const aclIntArray* normalizedShape, const aclTensor* weightOptional,
    const aclTensor* biasOptional, double eps, aclTensor* out, aclTensor* meanOutOptional,
    aclTensor* rstdOutOptional, uint64_t* workspaceSize, aclOpExecutor** ex) {
  Op op("aclnnLayerNorm");
  int x = op.in("input", input, kFloating);
  auto shape = op.ints("normalizedShape", normalizedShape);
  int w = op.in("weightOptional", weightOptional, kFloating, true);
  int b = op.in("biasOptional", biasOptional, kFloating, true);
  int o = op.out("out", out, kFloating);
  int m = op.out("meanOutOptional", meanOutOptional, kFloating, true);
  int r = op.out("rstdOutOptional", rstdOutOptional, kFloating, true);
  return op.build(workspaceSize, ex, ScratchBytes(Numel(input)), [=](Ctx& c) {
    auto res = at::native_layer_norm(F32(c.t[x]), shape, F32(c.t[w]), F32(c.t[b]), eps);
    c.set(o, std::get<0>(res));
    c.set(m, std::get<1>(res));
    c.set(r, std::get<2>(res));
  });
}
EMU_LAUNCH(LayerNorm)

OPAPI_EXPORT aclnnStatus aclnnLayerNormBackwardGetWorkspaceSize(
    const aclTensor* gradOut, const aclTensor* input, const aclIntArray* normalizedShape,
    const aclTensor* mean, const aclTensor* rstd, const aclTensor* weightOptional,
    const aclTensor* biasOptional, const aclBoolArray* outputMask, aclTensor* gradInputOut,
    aclTensor* gradWeightOut, aclTensor* gradBiasOut, uint64_t* workspaceSize, aclOpExecutor** ex) {
  Op op("aclnnLayerNormBackward");
  int g = op.in("gradOut", gradOut, kFloating);
  int x = op.in("input", input, kFloating);
  auto shape = op.ints("normalizedShape", normalizedShape);
  int mu = op.in("mean", mean, kFloating);
  int rs = op.in("rstd", rstd, kFloating);
  int w = op.in("weightOptional", weightOptional, kFloating, true);
  int b = op.in("biasOptional", biasOptional, kFloating, true);
  auto mask = op.bools("outputMask", outputMask);
  op.require(outputMask == nullptr || mask.size() == 3,
             "outputMask must hold 3 values, got " + std::to_string(mask.size()));
  int gi = op.out("gradInputOut", gradInputOut, kFloating, true);
  int gw = op.out("gradWeightOut", gradWeightOut, kFloating, true);
  int gb = op.out("gradBiasOut", gradBiasOut, kFloating, true);
  std::array<bool, 3> m3 = {true, true, true};
  if (mask.size() == 3) m3 = {mask[0], mask[1], mask[2]};
  return op.build(workspaceSize, ex, ScratchBytes(Numel(input)), [=](Ctx& c) {
    auto res = at::native_layer_norm_backward(F32(c.t[g]), F32(c.t[x]), shape, F32(c.t[mu]),
                                              F32(c.t[rs]), F32(c.t[w]), F32(c.t[b]), m3);
    if (m3[0]) c.set(gi, std::get<0>(res));
    if (m3[1]) c.set(gw, std::get<1>(res));
    if (m3[2]) c.set(gb, std::get<2>(res));
  });
}
EMU_LAUNCH(LayerNormBackward)

OPAPI_EXPORT aclnnStatus aclnnRmsNormGetWorkspaceSize(const aclTensor* x, const aclTensor* gamma,
                                                      double epsilon, const aclTensor* yOut,
                                                      const aclTensor* rstdOut,
                                                      uint64_t* workspaceSize, aclOpExecutor** ex) {
  Op op("aclnnRmsNorm");
  int xi = op.in("x", x, kFloating);
  int gi = op.in("gamma", gamma, kFloating);
  int yi = op.out("yOut", yOut, kFloating);
  int ri = op.out("rstdOut", rstdOut, Bit(ACL_FLOAT));
  return op.build(workspaceSize, ex, ScratchBytes(Numel(x)), [=](Ctx& c) {
    at::Tensor xv = F32(c.t[xi]);
    const int64_t nd = c.t[gi].dim();
    TORCH_CHECK(nd <= xv.dim(), "gamma has more dimensions than x");
    std::vector<int64_t> dims;
    for (int64_t d = xv.dim() - nd; d < xv.dim(); ++d) dims.push_back(d);
    at::Tensor rstd = at::rsqrt(at::mean(xv * xv, dims, /*keepdim=*/true) + epsilon);
    c.set(yi, xv * rstd * F32(c.t[gi]));
    // rstdOut keeps the reduced dimensions as 1 (or drops them): the same values either way.
    at::Tensor& ro = c.t[ri];
    c.set(ri, ro.dim() == rstd.dim() ? rstd : rstd.reshape(ro.sizes()));
  });
}
EMU_LAUNCH(RmsNorm)

OPAPI_EXPORT aclnnStatus aclnnEmbeddingGetWorkspaceSize(const aclTensor* weight,
                                                        const aclTensor* indices,
                                                        const aclTensor* out,
                                                        uint64_t* workspaceSize,
                                                        aclOpExecutor** ex) {
  Op op("aclnnEmbedding");
  int w = op.in("weight", weight, kArith);
  int i = op.in("indices", indices, kIndex);
  int o = op.out("out", out, kArith);
  return op.build(workspaceSize, ex, 0,
                  [=](Ctx& c) { c.set(o, at::embedding(c.t[w], c.t[i].to(at::kLong))); });
}
EMU_LAUNCH(Embedding)

OPAPI_EXPORT aclnnStatus aclnnEmbeddingDenseBackwardGetWorkspaceSize(
    const aclTensor* grad, const aclTensor* sortIndices, uint64_t numWeights, uint64_t paddingIdx,
    bool scaleGradByFreq, const aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** ex) {
  Op op("aclnnEmbeddingDenseBackward");
  int g = op.in("grad", grad, kFloating);
  int i = op.in("sortIndices", sortIndices, kIndex);
  int o = op.out("out", out, kFloating);
  const int64_t nw = static_cast<int64_t>(numWeights);
  const int64_t pad = static_cast<int64_t>(paddingIdx);
  return op.build(workspaceSize, ex, ScratchBytes(Numel(out)), [=](Ctx& c) {
    c.set(o, at::embedding_dense_backward(F32(c.t[g]), c.t[i].to(at::kLong), nw, pad,
                                          scaleGradByFreq));
  });
}
EMU_LAUNCH(EmbeddingDenseBackward)

OPAPI_EXPORT aclnnStatus aclnnIndexSelectGetWorkspaceSize(const aclTensor* self, int64_t dim,
                                                          const aclTensor* index, aclTensor* out,
                                                          uint64_t* workspaceSize,
                                                          aclOpExecutor** ex) {
  Op op("aclnnIndexSelect");
  int s = op.in("self", self, kWithBool);
  int i = op.in("index", index, kIndex);
  int o = op.out("out", out, kWithBool);
  return op.build(workspaceSize, ex, 0,
                  [=](Ctx& c) { c.set(o, at::index_select(c.t[s], dim, c.t[i])); });
}
EMU_LAUNCH(IndexSelect)

OPAPI_EXPORT aclnnStatus aclnnGatherGetWorkspaceSize(const aclTensor* self, int64_t dim,
                                                     const aclTensor* index, aclTensor* out,
                                                     uint64_t* workspaceSize, aclOpExecutor** ex) {
  Op op("aclnnGather");
  int s = op.in("self", self, kWithBool);
  int i = op.in("index", index, kIndex);
  int o = op.out("out", out, kWithBool);
  return op.build(workspaceSize, ex, 0,
                  [=](Ctx& c) { c.set(o, at::gather(c.t[s], dim, c.t[i].to(at::kLong))); });
}
EMU_LAUNCH(Gather)

OPAPI_EXPORT aclnnStatus aclnnScatterGetWorkspaceSize(const aclTensor* self, int64_t dim,
                                                      const aclTensor* index, const aclTensor* src,
                                                      int64_t reduce, aclTensor* out,
                                                      uint64_t* workspaceSize, aclOpExecutor** ex) {
  Op op("aclnnScatter");
  int s = op.in("self", self, kWithBool);
  int i = op.in("index", index, kIndex);
  int r = op.in("src", src, kWithBool);
  int o = op.out("out", out, kWithBool);
  op.require(reduce >= 0 && reduce <= 2,
             "reduce must be 0 (none), 1 (add) or 2 (multiply), got " + std::to_string(reduce));
  return op.build(workspaceSize, ex, 0, [=](Ctx& c) {
    at::Tensor idx = c.t[i].to(at::kLong);
    if (reduce == 0)
      c.set(o, at::scatter(c.t[s], dim, idx, c.t[r]));
    else
      c.set(o, at::scatter(c.t[s], dim, idx, c.t[r], reduce == 1 ? "add" : "multiply"));
  });
}
EMU_LAUNCH(Scatter)

OPAPI_EXPORT aclnnStatus aclnnScatterAddGetWorkspaceSize(const aclTensor* self, int64_t dim,
                                                         const aclTensor* index,
                                                         const aclTensor* src, aclTensor* out,
                                                         uint64_t* workspaceSize,
                                                         aclOpExecutor** ex) {
  Op op("aclnnScatterAdd");
  int s = op.in("self", self, kArith);
  int i = op.in("index", index, kIndex);
  int r = op.in("src", src, kArith);
  int o = op.out("out", out, kArith);
  return op.build(workspaceSize, ex, 0, [=](Ctx& c) {
    c.set(o, at::scatter_add(c.t[s], dim, c.t[i].to(at::kLong), c.t[r]));
  });
}
EMU_LAUNCH(ScatterAdd)

#define EMU_LISTOP(Name, FN)                                                               \
  OPAPI_EXPORT aclnnStatus aclnn##Name##GetWorkspaceSize(                                  \
      const aclTensorList* tensors, int64_t dim, aclTensor* out, uint64_t* workspaceSize,  \
      aclOpExecutor** ex) {                                                                \
    Op op("aclnn" #Name);                                                                  \
    int l = op.list("tensors", tensors, kWithBool);                                        \
    int o = op.out("out", out, kWithBool);                                                 \
    return op.build(workspaceSize, ex, 0, [=](Ctx& c) { c.set(o, FN(c.lists[l], dim)); }); \
  }                                                                                        \
  EMU_LAUNCH(Name)

EMU_LISTOP(Cat, at::cat)
EMU_LISTOP(Stack, at::stack)

OPAPI_EXPORT aclnnStatus aclnnArangeGetWorkspaceSize(const aclScalar* start, const aclScalar* end,
                                                     const aclScalar* step, aclTensor* out,
                                                     uint64_t* workspaceSize, aclOpExecutor** ex) {
  Op op("aclnnArange");
  at::Scalar a = op.scalar("start", start);
  at::Scalar b = op.scalar("end", end);
  at::Scalar s = op.scalar("step", step);
  int o = op.out("out", out, kArith);
  op.require(step == nullptr || s.toDouble() != 0, "step must be nonzero");
  return op.build(workspaceSize, ex, 0,
                  [=](Ctx& c) { c.set(o, at::arange(a, b, s, c.t[o].options())); });
}
EMU_LAUNCH(Arange)

OPAPI_EXPORT aclnnStatus aclnnConvolutionGetWorkspaceSize(
    const aclTensor* input, const aclTensor* weight, const aclTensor* bias,
    const aclIntArray* stride, const aclIntArray* padding, const aclIntArray* dilation,
    bool transposed, const aclIntArray* outputPadding, const int64_t groups, aclTensor* output,
    int8_t cubeMathType, uint64_t* workspaceSize, aclOpExecutor** ex) {
  Op op("aclnnConvolution");
  int x = op.in("input", input, kFloating);
  int w = op.in("weight", weight, kFloating);
  int b = op.in("bias", bias, kFloating, true);
  auto st = op.ints("stride", stride);
  auto pd = op.ints("padding", padding);
  auto dl = op.ints("dilation", dilation);
  auto op_ = op.ints("outputPadding", outputPadding, !transposed);
  int o = op.out("output", output, kFloating);
  op.require(cubeMathType >= 0 && cubeMathType <= 3, "cubeMathType must be 0..3");
  op.require(groups >= 1, "groups must be positive");
  if (op_.empty()) op_.assign(st.size(), 0);
  return op.build(workspaceSize, ex, ScratchBytes(Numel(output)), [=](Ctx& c) {
    c.set(o, at::convolution(F32(c.t[x]), F32(c.t[w]), F32(c.t[b]), st, pd, dl, transposed, op_,
                             groups));
  });
}
EMU_LAUNCH(Convolution)

OPAPI_EXPORT aclnnStatus aclnnConvolutionBackwardGetWorkspaceSize(
    const aclTensor* gradOutput, const aclTensor* input, const aclTensor* weight,
    const aclIntArray* biasSizes, const aclIntArray* stride, const aclIntArray* padding,
    const aclIntArray* dilation, bool transposed, const aclIntArray* outputPadding, int groups,
    const aclBoolArray* outputMask, int8_t cubeMathType, aclTensor* gradInput,
    aclTensor* gradWeight, aclTensor* gradBias, uint64_t* workspaceSize, aclOpExecutor** ex) {
  Op op("aclnnConvolutionBackward");
  int g = op.in("gradOutput", gradOutput, kFloating);
  int x = op.in("input", input, kFloating);
  int w = op.in("weight", weight, kFloating);
  auto bs = op.ints("biasSizes", biasSizes, true);
  auto st = op.ints("stride", stride);
  auto pd = op.ints("padding", padding);
  auto dl = op.ints("dilation", dilation);
  auto op_ = op.ints("outputPadding", outputPadding, !transposed);
  auto mask = op.bools("outputMask", outputMask);
  op.require(outputMask == nullptr || mask.size() == 3, "outputMask must hold 3 values");
  op.require(cubeMathType >= 0 && cubeMathType <= 3, "cubeMathType must be 0..3");
  op.require(groups >= 1, "groups must be positive");
  std::array<bool, 3> m3 = {true, true, true};
  if (mask.size() == 3) m3 = {mask[0], mask[1], mask[2]};
  int gi = op.out("gradInput", gradInput, kFloating, !m3[0]);
  int gw = op.out("gradWeight", gradWeight, kFloating, !m3[1]);
  int gb = op.out("gradBias", gradBias, kFloating, !m3[2]);
  if (op_.empty()) op_.assign(st.size(), 0);
  const bool hasBias = biasSizes != nullptr;
  return op.build(workspaceSize, ex, ScratchBytes(Numel(input) + Numel(weight)), [=](Ctx& c) {
    std::array<bool, 3> mk = m3;
    mk[2] = mk[2] && c.t[gb].defined();
    auto res =
        at::convolution_backward(F32(c.t[g]), F32(c.t[x]), F32(c.t[w]),
                                 hasBias ? at::OptionalIntArrayRef(bs) : at::OptionalIntArrayRef(),
                                 st, pd, dl, transposed, op_, groups, mk);
    if (mk[0]) c.set(gi, std::get<0>(res));
    if (mk[1]) c.set(gw, std::get<1>(res));
    if (mk[2]) c.set(gb, std::get<2>(res));
  });
}
EMU_LAUNCH(ConvolutionBackward)

namespace {

// CANN's dropout mask: one bit per element (bit j of byte k is element 8k + j; 1 = kept),
// sized to a multiple of 128 elements.
int64_t MaskBytes(int64_t n) { return ((n + 127) / 128) * 128 / 8; }

at::Tensor KeepMask(int64_t n, double p, int64_t seed, int64_t offset) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(
      static_cast<uint64_t>(seed) * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(offset));
  at::Tensor u = at::empty({n}, at::kFloat);
  u.uniform_(0.0, 1.0, gen);
  return u >= p;
}

at::Tensor PackBits(const at::Tensor& keep, int64_t bytes) {
  at::Tensor padded = at::zeros({bytes * 8}, at::kByte);
  padded.narrow(0, 0, keep.numel()).copy_(keep.reshape({-1}));
  at::Tensor weights = at::pow(at::full({8}, 2, at::kLong), at::arange(8, at::kLong));
  return (padded.view({bytes, 8}).to(at::kLong) * weights).sum(1).to(at::kByte);
}

at::Tensor UnpackBits(const at::Tensor& mask, int64_t n) {
  at::Tensor bits = at::arange(8, at::kLong);
  at::Tensor m = mask.reshape({-1}).to(at::kLong).unsqueeze(1);
  return at::bitwise_and(at::bitwise_right_shift(m, bits), 1).reshape({-1}).narrow(0, 0, n);
}

}  // namespace

OPAPI_EXPORT aclnnStatus aclnnDropoutGetWorkspaceSize(const aclTensor* input, double p, bool train,
                                                      int64_t seed, int64_t offset, aclTensor* out,
                                                      aclTensor* maskOut, uint64_t* workspaceSize,
                                                      aclOpExecutor** ex) {
  Op op("aclnnDropout");
  int x = op.in("input", input, kFloating);
  int o = op.out("out", out, kFloating);
  int m = op.out("maskOut", maskOut, Bit(ACL_UINT8));
  op.require(p >= 0 && p <= 1, "p must lie in [0, 1], got " + std::to_string(p));
  if (input != nullptr && maskOut != nullptr)
    op.require(
        Numel(maskOut) == MaskBytes(Numel(input)),
        "maskOut must hold align(numel, 128) / 8 = " + std::to_string(MaskBytes(Numel(input))) +
            " bytes, got " + std::to_string(Numel(maskOut)));
  return op.build(workspaceSize, ex, 0, [=](Ctx& c) {
    const at::Tensor& xv = c.t[x];
    // p == 0, p == 1 or eval: the mask is left as it is (CANN documents this).
    if (!train || p == 0) return c.set(o, xv);
    if (p == 1) return c.set(o, at::zeros_like(xv));
    if (c.meta) return c.set(o, xv);
    at::Tensor keep = KeepMask(xv.numel(), p, seed, offset);
    c.set(o, xv * keep.view(xv.sizes()).to(xv.scalar_type()) / (1.0 - p));
    c.t[m].copy_(PackBits(keep, c.t[m].numel()).view(c.t[m].sizes()));
  });
}
EMU_LAUNCH(Dropout)

OPAPI_EXPORT aclnnStatus aclnnDropoutGenMaskGetWorkspaceSize(const aclIntArray* shape, double prob,
                                                             int64_t seed, int64_t offset,
                                                             aclTensor* out,
                                                             uint64_t* workspaceSize,
                                                             aclOpExecutor** ex) {
  Op op("aclnnDropoutGenMask");
  auto sh = op.ints("shape", shape);
  int o = op.out("out", out, Bit(ACL_UINT8));
  op.require(prob >= 0 && prob <= 1, "prob must lie in [0, 1]");
  int64_t n = 1;
  for (int64_t d : sh) n *= d;
  if (out != nullptr)
    op.require(Numel(out) == MaskBytes(n), "out must hold align(numel(shape), 128) / 8 = " +
                                               std::to_string(MaskBytes(n)) + " bytes");
  return op.build(workspaceSize, ex, 0, [=](Ctx& c) {
    if (c.meta) return;
    c.t[o].copy_(PackBits(KeepMask(n, prob, seed, offset), c.t[o].numel()).view(c.t[o].sizes()));
  });
}
EMU_LAUNCH(DropoutGenMask)

namespace {

// What both V2 forms check beyond GenMask: the prob dtype, and the mask's size.
int64_t GenMaskV2Checks(Op& op, const std::vector<int64_t>& shape, double prob,
                        aclDataType probDataType, const aclTensor* out) {
  op.require(prob >= 0 && prob <= 1, "prob must lie in [0, 1]");
  op.require(probDataType == ACL_FLOAT || probDataType == ACL_FLOAT16 || probDataType == ACL_BF16,
             std::string("probDataType must be FLOAT, FLOAT16 or BFLOAT16, got ") +
                 emu_nn::DtypeName(probDataType));
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (out != nullptr)
    op.require(Numel(out) == MaskBytes(n), "out must hold align(numel(shape), 128) / 8 = " +
                                               std::to_string(MaskBytes(n)) + " bytes");
  return n;
}

}  // namespace

OPAPI_EXPORT aclnnStatus aclnnDropoutGenMaskV2GetWorkspaceSize(
    const aclIntArray* shape, double prob, int64_t seed, int64_t offset, aclDataType probDataType,
    aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** ex) {
  Op op("aclnnDropoutGenMaskV2");
  auto sh = op.ints("shape", shape);
  int o = op.out("out", out, Bit(ACL_UINT8));
  const int64_t n = GenMaskV2Checks(op, sh, prob, probDataType, out);
  return op.build(workspaceSize, ex, 0, [=](Ctx& c) {
    if (c.meta) return;
    c.t[o].copy_(PackBits(KeepMask(n, prob, seed, offset), c.t[o].numel()).view(c.t[o].sizes()));
  });
}
EMU_LAUNCH(DropoutGenMaskV2)

// The seed and offset live in device tensors (INT64, shape [1]) read when the op runs, so a
// replayed graph draws with the values written before its launch; `offset` adds to offsetTensor.
OPAPI_EXPORT aclnnStatus aclnnDropoutGenMaskV2TensorGetWorkspaceSize(
    const aclIntArray* shape, double prob, const aclTensor* seedTensor,
    const aclTensor* offsetTensor, int64_t offset, aclDataType probDataType, aclTensor* out,
    uint64_t* workspaceSize, aclOpExecutor** ex) {
  Op op("aclnnDropoutGenMaskV2Tensor");
  auto sh = op.ints("shape", shape);
  int s = op.in("seedTensor", seedTensor, Bit(ACL_INT64));
  int f = op.in("offsetTensor", offsetTensor, Bit(ACL_INT64));
  int o = op.out("out", out, Bit(ACL_UINT8));
  if (seedTensor != nullptr) op.require(Numel(seedTensor) == 1, "seedTensor must have shape [1]");
  if (offsetTensor != nullptr)
    op.require(Numel(offsetTensor) == 1, "offsetTensor must have shape [1]");
  const int64_t n = GenMaskV2Checks(op, sh, prob, probDataType, out);
  return op.build(workspaceSize, ex, 0, [=](Ctx& c) {
    if (c.meta) return;
    const int64_t seed = c.t[s].reshape({}).item<int64_t>();
    const int64_t base = c.t[f].reshape({}).item<int64_t>();
    c.t[o].copy_(
        PackBits(KeepMask(n, prob, seed, base + offset), c.t[o].numel()).view(c.t[o].sizes()));
  });
}
EMU_LAUNCH(DropoutGenMaskV2Tensor)

OPAPI_EXPORT aclnnStatus aclnnDropoutDoMaskGetWorkspaceSize(const aclTensor* self,
                                                            const aclTensor* mask, double prob,
                                                            aclTensor* out, uint64_t* workspaceSize,
                                                            aclOpExecutor** ex) {
  Op op("aclnnDropoutDoMask");
  int s = op.in("self", self, kFloating);
  int m = op.in("mask", mask, Bit(ACL_UINT8));
  int o = op.out("out", out, kFloating);
  op.require(prob >= 0 && prob < 1, "prob must lie in [0, 1)");
  if (self != nullptr && mask != nullptr)
    op.require(Numel(mask) * 8 >= Numel(self), "mask holds fewer bits than self has elements");
  return op.build(workspaceSize, ex, 0, [=](Ctx& c) {
    const at::Tensor& xv = c.t[s];
    if (c.meta) return c.set(o, xv);
    at::Tensor keep = UnpackBits(c.t[m], xv.numel()).view(xv.sizes()).to(xv.scalar_type());
    c.set(o, xv * keep / (1.0 - prob));
  });
}
EMU_LAUNCH(DropoutDoMask)

OPAPI_EXPORT aclnnStatus aclnnForeachNonFiniteCheckAndUnscaleGetWorkspaceSize(
    const aclTensorList* scaledGrads, const aclTensor* foundInf, const aclTensor* inScale,
    uint64_t* workspaceSize, aclOpExecutor** ex) {
  Op op("aclnnForeachNonFiniteCheckAndUnscale");
  int l = op.list("scaledGrads", scaledGrads, kFloating);
  int f = op.in("foundInf", foundInf, Bit(ACL_FLOAT));
  int s = op.in("inScale", inScale, Bit(ACL_FLOAT));
  return op.build(workspaceSize, ex, 0, [=](Ctx& c) {
    TORCH_CHECK(c.t[f].numel() == 1 && c.t[s].numel() == 1,
                "foundInf and inScale must hold one element");
    for (at::Tensor& g : c.lists[l]) {
      if (!c.meta && !at::isfinite(g).all().item<bool>()) c.t[f].fill_(1.0);
      g.mul_(c.t[s].reshape({}));
    }
  });
}
EMU_LAUNCH(ForeachNonFiniteCheckAndUnscale)

OPAPI_EXPORT aclnnStatus aclnnAmpUpdateScaleGetWorkspaceSize(
    const aclTensor* currentScale, const aclTensor* growthTracker, const aclTensor* foundInf,
    double growthFactor, double backoffFactor, int64_t growthInterval,
    const aclTensor* updatedScaleOut, const aclTensor* updatedGrowthTrackerOut,
    uint64_t* workspaceSize, aclOpExecutor** ex) {
  Op op("aclnnAmpUpdateScale");
  int cs = op.in("currentScale", currentScale, Bit(ACL_FLOAT));
  int gt = op.in("growthTracker", growthTracker, Bit(ACL_INT32));
  int fi = op.in("foundInf", foundInf, Bit(ACL_FLOAT));
  int us = op.out("updatedScaleOut", updatedScaleOut, Bit(ACL_FLOAT));
  int ug = op.out("updatedGrowthTrackerOut", updatedGrowthTrackerOut, Bit(ACL_INT32));
  op.require(growthInterval > 0, "growthInterval must be positive");
  return op.build(workspaceSize, ex, 0, [=](Ctx& c) {
    for (int k : {cs, gt, fi, us, ug})
      TORCH_CHECK(c.t[k].numel() == 1, "AMP scale tensors hold one element");
    if (c.meta) return;
    float scale = c.t[cs].item<float>();
    int32_t tracker = c.t[gt].item<int32_t>();
    if (c.t[fi].item<float>() > 0) {
      scale = static_cast<float>(scale * backoffFactor);
      tracker = 0;
    } else if (tracker + 1 == growthInterval) {
      const float grown = static_cast<float>(scale * growthFactor);
      if (std::isfinite(grown)) scale = grown;
      tracker = 0;
    } else {
      tracker += 1;
    }
    c.t[us].fill_(scale);
    c.t[ug].fill_(tracker);
  });
}
EMU_LAUNCH(AmpUpdateScale)
