// One routine per category of the ops table (tools/aclnn_ops.py). The
// generated kernels (build/generated/aclnn_kernels.cpp) call these with the
// typed ACLNN functions (the aclnnop/ headers' prototypes: never an untyped
// pointer, so no argument is promoted behind the compiler's back) and the
// dtypes the op's ACLNN kernel computes in.
#pragma once

#include <torch_fl/kit/type_promotion.h>

#include "aclnn_common.h"

namespace tfl_ascend {

using Exec = aclOpExecutor**;
using Ws = uint64_t*;
using T = const aclTensor*;
using O = aclTensor*;
using S = const aclScalar*;
using IA = const aclIntArray*;
using BA = const aclBoolArray*;
using TL = const aclTensorList*;

using UnaryWs = aclnnStatus (*)(T, O, Ws, Exec);
using BinaryWs = aclnnStatus (*)(T, T, O, Ws, Exec);
using ScalarWs = aclnnStatus (*)(T, S, O, Ws, Exec);
using AlphaWs = aclnnStatus (*)(T, T, S, O, Ws, Exec);
using AlphaScalarWs = aclnnStatus (*)(T, S, S, O, Ws, Exec);
using GeluWs = aclnnStatus (*)(T, int64_t, O, Ws, Exec);
using GeluBwdWs = aclnnStatus (*)(T, T, char*, O, Ws, Exec);
using SumWs = aclnnStatus (*)(T, IA, bool, aclDataType, O, Ws, Exec);
using ReduceWs = aclnnStatus (*)(T, IA, bool, O, Ws, Exec);
using DimIndexWs = aclnnStatus (*)(T, int64_t, bool, O, O, Ws, Exec);
using ArgWs = aclnnStatus (*)(T, int64_t, bool, O, Ws, Exec);
using MmWs = aclnnStatus (*)(T, T, O, int8_t, Ws, Exec);
using AddmmWs = aclnnStatus (*)(T, T, T, S, S, O, int8_t, Ws, Exec);
using CumsumWs = aclnnStatus (*)(T, int64_t, aclDataType, O, Ws, Exec);
using SoftmaxWs = aclnnStatus (*)(T, int64_t, O, Ws, Exec);
using SoftmaxBwdWs = aclnnStatus (*)(T, T, int64_t, O, Ws, Exec);
using MseLossWs = aclnnStatus (*)(T, T, int64_t, O, Ws, Exec);
using MseLossBwdWs = aclnnStatus (*)(T, T, T, int64_t, O, Ws, Exec);
using LayerNormWs = aclnnStatus (*)(T, IA, T, T, double, O, O, O, Ws, Exec);
using LayerNormBwdWs = aclnnStatus (*)(T, T, IA, T, T, T, T, BA, O, O, O, Ws, Exec);
using RmsNormWs = aclnnStatus (*)(T, T, double, T, T, Ws, Exec);
using EmbeddingWs = aclnnStatus (*)(T, T, T, Ws, Exec);
using EmbeddingBwdWs = aclnnStatus (*)(T, T, uint64_t, uint64_t, bool, T, Ws, Exec);
using IndexWs = aclnnStatus (*)(T, int64_t, T, O, Ws, Exec);
using ScatterWs = aclnnStatus (*)(T, int64_t, T, T, int64_t, O, Ws, Exec);
using ScatterAddWs = aclnnStatus (*)(T, int64_t, T, T, O, Ws, Exec);
using ListWs = aclnnStatus (*)(TL, int64_t, O, Ws, Exec);
using WhereWs = aclnnStatus (*)(T, T, T, O, Ws, Exec);
using MaskedFillWs = aclnnStatus (*)(O, T, S, Ws, Exec);
using FillWs = aclnnStatus (*)(O, S, Ws, Exec);
using ZeroWs = aclnnStatus (*)(O, Ws, Exec);
using ArangeWs = aclnnStatus (*)(S, S, S, O, Ws, Exec);
using ConvWs = aclnnStatus (*)(T, T, T, IA, IA, IA, bool, IA, int64_t, O, int8_t, Ws, Exec);
using ConvBwdWs = aclnnStatus (*)(T, T, T, IA, IA, IA, IA, bool, IA, int, BA, int8_t, O, O, O, Ws,
                                  Exec);

using torch_fl::kit::BinaryKind;
using torch_fl::kit::UnaryKind;

// The names after `dtypes` are the routine's extra arguments in the ops table.
void unary(Call& c, UnaryWs ws, RunFn run, const char* fn, const DtypeSet& dtypes, UnaryKind kind);
void gelu(Call& c, GeluWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void binary(Call& c, BinaryWs ws, RunFn run, const char* fn, const DtypeSet& dtypes,
            BinaryKind kind);
void binary_scalar(Call& c, ScalarWs ws, RunFn run, const char* fn, const DtypeSet& dtypes,
                   BinaryKind kind);
void binary_alpha(Call& c, AlphaWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void binary_alpha_scalar(Call& c, AlphaScalarWs ws, RunFn run, const char* fn,
                         const DtypeSet& dtypes);
void pow_tensor(Call& c, BinaryWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void pow_scalar(Call& c, ScalarWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void compare(Call& c, BinaryWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void compare_scalar(Call& c, ScalarWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
// Two same-dtype tensors `a`, `b` (schema names), e.g. tanh_backward(grad_output, output).
void backward2(Call& c, BinaryWs ws, RunFn run, const char* fn, const DtypeSet& dtypes,
               const char* a, const char* b);
void threshold_backward(Call& c, AlphaWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void gelu_backward(Call& c, GeluBwdWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void reduce_sum(Call& c, SumWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void reduce_mean(Call& c, SumWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void reduce_extremum(Call& c, ReduceWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void reduce_bool(Call& c, ReduceWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void reduce_dim_index(Call& c, DimIndexWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void reduce_arg(Call& c, ArgWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void cumsum(Call& c, CumsumWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void mm(Call& c, MmWs ws, RunFn run, const char* fn, const DtypeSet& dtypes, int rank);
void addmm(Call& c, AddmmWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void softmax(Call& c, SoftmaxWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void softmax_backward(Call& c, SoftmaxBwdWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void mse_loss(Call& c, MseLossWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void mse_loss_backward(Call& c, MseLossBwdWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void layer_norm(Call& c, LayerNormWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void layer_norm_backward(Call& c, LayerNormBwdWs ws, RunFn run, const char* fn,
                         const DtypeSet& dtypes);
void rms_norm(Call& c, RmsNormWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void embedding(Call& c, EmbeddingWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void embedding_backward(Call& c, EmbeddingBwdWs ws, RunFn run, const char* fn,
                        const DtypeSet& dtypes);
void index_select(Call& c, IndexWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void gather(Call& c, IndexWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void scatter(Call& c, ScatterWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void scatter_add(Call& c, ScatterAddWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void cat(Call& c, ListWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void stack(Call& c, ListWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void where(Call& c, WhereWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void masked_fill(Call& c, MaskedFillWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void fill(Call& c, FillWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void zero(Call& c, ZeroWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void arange(Call& c, ArangeWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void convolution(Call& c, ConvWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);
void convolution_backward(Call& c, ConvBwdWs ws, RunFn run, const char* fn, const DtypeSet& dtypes);

}  // namespace tfl_ascend
