// One routine per category of the ops table (tools/topsaten_ops.py). The
// generated kernels (build/generated/topsaten_kernels.cpp) call these with
// the topsaten function the SDK exports for that op.
#pragma once

#include <torch_fl/kit/type_promotion.h>

#include "topsaten_common.h"

namespace tfl_gcu {

using topsaten::topsatenDataType_t;
using topsaten::topsatenScalar_t;
using topsaten::topsatenSize_t;
using topsaten::topsatenStatus_t;
using topsaten::topsatenTensor;

using UnaryFn = topsatenStatus_t (*)(topsatenTensor&, const topsatenTensor&, topsStream_t);
using BinaryFn = topsatenStatus_t (*)(topsatenTensor&, const topsatenTensor&, const topsatenTensor&,
                                      topsStream_t);
using AlphaFn = topsatenStatus_t (*)(topsatenTensor&, const topsatenTensor&, const topsatenTensor&,
                                     const topsatenScalar_t&, topsStream_t);
using SumFn = topsatenStatus_t (*)(topsatenTensor&, const topsatenTensor&, topsatenSize_t, bool,
                                   topsatenDataType_t, topsStream_t);
using ExtremumFn = topsatenStatus_t (*)(topsatenTensor&, const topsatenTensor&, topsatenSize_t,
                                        bool, topsStream_t);
using NormFn = topsatenStatus_t (*)(topsatenTensor&, const topsatenTensor&, const topsatenScalar_t&,
                                    topsatenSize_t, bool, topsatenDataType_t, topsStream_t);
using AddmmFn = topsatenStatus_t (*)(topsatenTensor&, const topsatenTensor&, const topsatenTensor&,
                                     const topsatenTensor&, const topsatenScalar_t&,
                                     const topsatenScalar_t&, topsStream_t);
using SoftmaxFn = topsatenStatus_t (*)(topsatenTensor&, const topsatenTensor&, int64_t, bool,
                                       topsStream_t);
using SoftmaxBwdFn = topsatenStatus_t (*)(topsatenTensor&, const topsatenTensor&,
                                          const topsatenTensor&, int64_t, topsStream_t);
using LayerNormFn = topsatenStatus_t (*)(topsatenTensor&, topsatenTensor&, topsatenTensor&,
                                         const topsatenTensor&, topsatenSize_t,
                                         const topsatenTensor&, const topsatenTensor&, double,
                                         topsStream_t);
using ArangeFn = topsatenStatus_t (*)(topsatenTensor&, const topsatenScalar_t&,
                                      const topsatenScalar_t&, const topsatenScalar_t&,
                                      topsatenDataType_t, int64_t, bool, topsStream_t);
using FillFn = topsatenStatus_t (*)(topsatenTensor&, const topsatenScalar_t&, topsStream_t);
using ZeroFn = topsatenStatus_t (*)(topsatenTensor&, topsStream_t);
using MaskedFillFn = topsatenStatus_t (*)(topsatenTensor&, const topsatenTensor&,
                                          const topsatenTensor&, const topsatenScalar_t&,
                                          topsStream_t);
using WhereFn = topsatenStatus_t (*)(topsatenTensor&, const topsatenTensor&, const topsatenTensor&,
                                     const topsatenTensor&, topsStream_t);
using IndexSelectFn = topsatenStatus_t (*)(topsatenTensor&, const topsatenTensor&, int64_t,
                                           const topsatenTensor&, topsStream_t);
using IndexFillFn = topsatenStatus_t (*)(topsatenTensor&, const topsatenTensor&, int64_t,
                                         const topsatenTensor&, const topsatenScalar_t&,
                                         topsStream_t);
using EmbeddingBwdFn = topsatenStatus_t (*)(topsatenTensor&, const topsatenTensor&,
                                            const topsatenTensor&, int64_t, int64_t, bool,
                                            topsStream_t);
using CatFn = topsatenStatus_t (*)(topsatenTensor&, const std::vector<topsatenTensor>&, int64_t,
                                   topsStream_t);
using UpsampleFn = topsatenStatus_t (*)(topsatenTensor&, const topsatenTensor&, topsatenSize_t,
                                        double, double, topsStream_t);

using TernaryFn = topsatenStatus_t (*)(topsatenTensor&, const topsatenTensor&,
                                       const topsatenTensor&, const topsatenTensor&,
                                       const topsatenScalar_t&, topsStream_t);
using LerpFn = topsatenStatus_t (*)(topsatenTensor&, const topsatenTensor&, const topsatenTensor&,
                                    const topsatenScalar_t&, topsStream_t);
using NonzeroFn = topsatenStatus_t (*)(topsatenTensor&, int64_t*, const topsatenTensor&,
                                       topsStream_t);
using IndexFn = topsatenStatus_t (*)(topsatenTensor&, const topsatenTensor&,
                                     const std::vector<topsatenTensor>&, topsStream_t);

using torch_fl::kit::BinaryKind;
using torch_fl::kit::UnaryKind;

void unary(Call& c, UnaryFn fn, const char* tops, UnaryKind kind);
// `a`, `b`: schema names of the two operands (Tensor or Scalar).
void binary(Call& c, BinaryFn fn, const char* tops, BinaryKind kind, const char* a, const char* b);
void binary_alpha(Call& c, AlphaFn fn, const char* tops);
// Two tensor operands `a`, `b` (same dtype) and a Scalar attribute `s`, e.g. threshold_backward.
void binary_scalar(Call& c, AlphaFn fn, const char* tops, const char* a, const char* b,
                   const char* s);
void reduce_sum(Call& c, SumFn fn, const char* tops, bool mean);
void reduce_extremum(Call& c, ExtremumFn fn, const char* tops);
void reduce_all(Call& c, UnaryFn fn, const char* tops);
void vector_norm(Call& c, NormFn fn, const char* tops);
void mm(Call& c, BinaryFn fn, const char* tops, int rank);
void addmm(Call& c, AddmmFn fn, const char* tops);
void softmax(Call& c, SoftmaxFn fn, const char* tops);
void softmax_backward(Call& c, SoftmaxBwdFn fn, const char* tops);
void layer_norm(Call& c, LayerNormFn fn, const char* tops);
void arange(Call& c, ArangeFn fn, const char* tops);
void fill(Call& c, FillFn fn, const char* tops);
void zero(Call& c, ZeroFn fn, const char* tops);
void masked_fill(Call& c, MaskedFillFn fn, const char* tops);
void where(Call& c, WhereFn fn, const char* tops);
void index_select(Call& c, IndexSelectFn fn, const char* tops);
void index_fill(Call& c, IndexFillFn fn, const char* tops);
void embedding_backward(Call& c, EmbeddingBwdFn fn, const char* tops);
void cat(Call& c, CatFn fn, const char* tops);
void pointwise3(Call& c, TernaryFn fn, const char* tops);
void lerp(Call& c, LerpFn fn, const char* tops);
void nonzero(Call& c, NonzeroFn fn, const char* tops);
void index_tensor(Call& c, IndexFn fn, const char* tops);
void upsample_nearest_exact2d(Call& c, UpsampleFn fn, const char* tops);

}  // namespace tfl_gcu
