// Softmax, layer norm and nearest upsampling.
#include <algorithm>
#include <cmath>

#include "aten_op.h"

namespace topsaten {

namespace {
topsatenStatus_t softmax(const char* name, T& out, const T& self, int64_t dim, bool half_to_float,
                         St s, bool log) {
  Call c(name, s);
  Buf o = c.take(out), a = c.take(self);
  c.require(o.dims == a.dims);
  c.require(!half_to_float || (a.dt == TOPSATEN_DATA_FP16 && o.dt == TOPSATEN_DATA_FP32));
  int64_t outer = 0, len = 0, inner = 0;
  c.require(c.ok() && split(a.dims, dim, &outer, &len, &inner));
  if (!c.ok()) return c.status();
  for (int64_t b = 0; b < outer; ++b)
    for (int64_t j = 0; j < inner; ++j) {
      const int64_t base = b * len * inner + j;
      double mx = -INFINITY;
      for (int64_t i = 0; i < len; ++i) mx = std::max(mx, a.get(base + i * inner));
      double sum = 0;
      for (int64_t i = 0; i < len; ++i) sum += std::exp(a.get(base + i * inner) - mx);
      for (int64_t i = 0; i < len; ++i) {
        const double x = a.get(base + i * inner) - mx;
        o.set(base + i * inner, log ? x - std::log(sum) : std::exp(x) / sum);
      }
    }
  return TOPSATEN_STATUS_SUCCESS;
}

topsatenStatus_t softmax_bwd(const char* name, T& gi, const T& go, const T& out, int64_t dim, St s,
                             bool log) {
  Call c(name, s);
  Buf g = c.take(gi), gy = c.take(go), y = c.take(out);
  c.require(g.dims == gy.dims && gy.dims == y.dims);
  int64_t outer = 0, len = 0, inner = 0;
  c.require(c.ok() && split(y.dims, dim, &outer, &len, &inner));
  if (!c.ok()) return c.status();
  for (int64_t b = 0; b < outer; ++b)
    for (int64_t j = 0; j < inner; ++j) {
      const int64_t base = b * len * inner + j;
      double acc = 0;
      for (int64_t i = 0; i < len; ++i) {
        const int64_t k = base + i * inner;
        acc += log ? gy.get(k) : gy.get(k) * y.get(k);
      }
      for (int64_t i = 0; i < len; ++i) {
        const int64_t k = base + i * inner;
        g.set(k, log ? gy.get(k) - std::exp(y.get(k)) * acc : y.get(k) * (gy.get(k) - acc));
      }
    }
  return TOPSATEN_STATUS_SUCCESS;
}
}  // namespace

ATEN_API topsatenStatus_t topsatenSoftmaxForward(T& out, const T& self, int64_t dim, bool h2f,
                                                 St s) {
  return softmax("topsatenSoftmaxForward", out, self, dim, h2f, s, false);
}
ATEN_API topsatenStatus_t topsatenLogSoftmaxForward(T& out, const T& self, int64_t dim, bool h2f,
                                                    St s) {
  return softmax("topsatenLogSoftmaxForward", out, self, dim, h2f, s, true);
}
ATEN_API topsatenStatus_t topsatenSoftmaxBackward(T& gi, const T& go, const T& out, int64_t dim,
                                                  St s) {
  return softmax_bwd("topsatenSoftmaxBackward", gi, go, out, dim, s, false);
}
ATEN_API topsatenStatus_t topsatenLogSoftmaxBackward(T& gi, const T& go, const T& out, int64_t dim,
                                                     St s) {
  return softmax_bwd("topsatenLogSoftmaxBackward", gi, go, out, dim, s, true);
}

// ---- layer norm ----
// The measured S60 defect: SUCCESS, and nothing written.
ATEN_API topsatenStatus_t topsatenNativeLayerNormBackward(T& gi, T& gw, T& gb, const T& go,
                                                          const T& input, Z, const T& mean,
                                                          const T& rstd, const T&, const T&, St s) {
  Call c("topsatenNativeLayerNormBackward", s);
  c.take(gi);
  c.take(go);
  c.take(input);
  c.take(mean);
  c.take(rstd);
  if (gw.defined()) c.take(gw);
  if (gb.defined()) c.take(gb);
  return c.status();
}

ATEN_API topsatenStatus_t topsatenNativeLayerNorm(T& out, T& mean, T& rstd, const T& input,
                                                  Z normalized_shape, const T& weight,
                                                  const T& bias, double eps, St s) {
  Call c("topsatenNativeLayerNorm", s);
  Buf o = c.take(out), mu = c.take(mean), rs = c.take(rstd), x = c.take(input);
  Buf w, b;
  if (weight.defined()) w = c.take(weight);
  if (bias.defined()) b = c.take(bias);
  c.require(o.dims == x.dims && normalized_shape.len >= 1 &&
            normalized_shape.len <= static_cast<int64_t>(x.dims.size()));
  if (!c.ok()) return c.status();
  int64_t N = 1;
  for (int64_t i = 0; i < normalized_shape.len; ++i) {
    const int64_t d = x.dims[x.dims.size() - normalized_shape.len + i];
    if (d != normalized_shape.data[i]) return TOPSATEN_STATUS_BAD_PARAM;
    N *= d;
  }
  const int64_t M = N ? x.n / N : 0;
  if (mu.n != M || rs.n != M || (w.p && w.n != N) || (b.p && b.n != N))
    return TOPSATEN_STATUS_BAD_PARAM;
  for (int64_t r = 0; r < M; ++r) {
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < N; ++i) sum += x.get(r * N + i);
    const double m = sum / N;
    for (int64_t i = 0; i < N; ++i) {
      const double d = x.get(r * N + i) - m;
      sq += d * d;
    }
    const double inv = 1.0 / std::sqrt(sq / N + eps);
    mu.set(r, m);
    rs.set(r, inv);
    for (int64_t i = 0; i < N; ++i) {
      double y = (x.get(r * N + i) - m) * inv;
      if (w.p) y *= w.get(i);
      if (b.p) y += b.get(i);
      o.set(r * N + i, y);
    }
  }
  return TOPSATEN_STATUS_SUCCESS;
}

ATEN_API topsatenStatus_t topsatenUpsampleNearestExact2d(T& out, const T& self, Z output_size,
                                                         double scales_h, double scales_w, St s) {
  Call c("topsatenUpsampleNearestExact2d", s);
  Buf o = c.take(out), a = c.take(self);
  c.require(a.dims.size() == 4 && o.dims.size() == 4 && output_size.len == 2);
  c.require(c.ok() && o.dims[0] == a.dims[0] && o.dims[1] == a.dims[1] &&
            o.dims[2] == output_size.data[0] && o.dims[3] == output_size.data[1]);
  if (!c.ok()) return c.status();
  const int64_t NC = a.dims[0] * a.dims[1], H = a.dims[2], W = a.dims[3], OH = o.dims[2],
                OW = o.dims[3];
  const double sh = scales_h > 0 ? 1.0 / scales_h : static_cast<double>(H) / OH;
  const double sw = scales_w > 0 ? 1.0 / scales_w : static_cast<double>(W) / OW;
  for (int64_t p = 0; p < NC; ++p)
    for (int64_t y = 0; y < OH; ++y) {
      const int64_t iy = std::min(static_cast<int64_t>(std::floor((y + 0.5) * sh)), H - 1);
      for (int64_t x = 0; x < OW; ++x) {
        const int64_t ix = std::min(static_cast<int64_t>(std::floor((x + 0.5) * sw)), W - 1);
        o.set((p * OH + y) * OW + x, a.get((p * H + iy) * W + ix));
      }
    }
  return TOPSATEN_STATUS_SUCCESS;
}

}  // namespace topsaten
