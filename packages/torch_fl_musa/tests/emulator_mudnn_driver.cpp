// Drives the emulated libmudnn.so through its SDK API (test_emulator_mudnn.py builds it against
// the emulator prefix). `driver CASE` runs one case, prints a FAIL line per failed check and
// "DONE n" with the number of failures; the exit status is 0 only when none failed.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "mudnn.h"
#include "musa_emulator.h"
#include "musa_runtime_api.h"

using musa::dnn::Status;
using Type = musa::dnn::Tensor::Type;
namespace dnn = musa::dnn;

static int g_failures = 0;

#define CHECK(cond)                                               \
  do {                                                            \
    if (!(cond)) {                                                \
      std::printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                               \
    }                                                             \
  } while (0)
#define CHECK_STATUS(expr, want)                                                        \
  do {                                                                                  \
    int got_ = static_cast<int>(expr);                                                  \
    if (got_ != static_cast<int>(want)) {                                               \
      std::printf("FAIL %s:%d: %s gave %d, want %d\n", __FILE__, __LINE__, #expr, got_, \
                  static_cast<int>(want));                                              \
      ++g_failures;                                                                     \
    }                                                                                   \
  } while (0)

// Bitwise equality of floats (NaN equal to NaN), reported with both values.
static void check_floats(const std::vector<float>& got, const std::vector<float>& want,
                         const char* what) {
  if (got.size() != want.size()) {
    std::printf("FAIL %s: %zu values, want %zu\n", what, got.size(), want.size());
    ++g_failures;
    return;
  }
  for (size_t i = 0; i < got.size(); ++i) {
    bool same = std::memcmp(&got[i], &want[i], 4) == 0 || (got[i] != got[i] && want[i] != want[i]);
    if (!same) {
      std::printf("FAIL %s[%zu]: %.9g, want %.9g\n", what, i, got[i], want[i]);
      ++g_failures;
    }
  }
}

static void check_close(const std::vector<float>& got, const std::vector<double>& want, double rtol,
                        const char* what) {
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    if (std::fabs(got[i] - want[i]) > rtol * std::fabs(want[i]) + 1e-7) {
      std::printf("FAIL %s[%zu]: %.9g, want %.9g\n", what, i, got[i], want[i]);
      ++g_failures;
    }
  }
  CHECK(got.size() == want.size());
}

static void* dalloc(size_t bytes) {
  void* p = nullptr;
  if (musaMalloc(&p, bytes) != musaSuccess) {
    std::printf("FAIL musaMalloc(%zu)\n", bytes);
    ++g_failures;
  }
  return p;
}

template <typename T>
static void* upload(const std::vector<T>& v) {
  void* p = dalloc(v.size() * sizeof(T));
  CHECK(musaMemcpy(p, v.data(), v.size() * sizeof(T), musaMemcpyHostToDevice) == musaSuccess);
  return p;
}

template <typename T>
static std::vector<T> download(const void* p, size_t n) {
  std::vector<T> v(n);
  CHECK(musaMemcpy(v.data(), p, n * sizeof(T), musaMemcpyDeviceToHost) == musaSuccess);
  return v;
}

template <typename T>
static T* at(void* p, int64_t elems) {
  return static_cast<T*>(p) + elems;
}

static dnn::Tensor desc(Type t, const void* addr, std::vector<int64_t> dims,
                        std::vector<int64_t> strides = {}) {
  dnn::Tensor d;
  CHECK(d.SetType(t) == Status::SUCCESS);
  CHECK(d.SetAddr(addr) == Status::SUCCESS);
  int nd = static_cast<int>(dims.size());
  if (strides.empty()) {
    CHECK(d.SetNdInfo(nd, dims.data()) == Status::SUCCESS);
  } else {
    CHECK(d.SetNdInfo(nd, dims.data(), strides.data()) == Status::SUCCESS);
  }
  return d;
}

static void sync() { CHECK(musaDeviceSynchronize() == musaSuccess); }

static float f32(double v) { return static_cast<float>(v); }

static float half_bits_to_float(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  float v = e == 0 ? std::ldexp(static_cast<float>(m), -24)
                   : (e == 31 ? (m ? NAN : INFINITY) : std::ldexp(1024.0f + m, e - 25));
  return (h & 0x8000) ? -v : v;
}

// a [4, 3] as the transpose of a contiguous [3, 4] starting 2 elements into its allocation; b
// [4, 3] broadcast from a 4-vector (stride 0); out = a + 2.5 * b; then in place: a += b.
static void case_binary_add_strided() {
  std::vector<float> base(2 + 12), vec = {0.5f, -1.25f, 3.0f, 0.1f};
  for (int i = 0; i < 14; ++i) base[i] = 0.37f * i - 1.0f;
  void* pa = upload(base);
  void* pb = upload(vec);
  void* po = dalloc(12 * 4);
  dnn::Handle h;
  dnn::Binary add;
  CHECK(add.SetMode(dnn::Binary::Mode::ADD) == Status::SUCCESS);
  CHECK(add.SetAlpha(2.5) == Status::SUCCESS);
  dnn::Tensor out = desc(Type::FLOAT, po, {4, 3});
  dnn::Tensor a = desc(Type::FLOAT, at<float>(pa, 2), {4, 3}, {1, 4});
  dnn::Tensor b = desc(Type::FLOAT, pb, {4, 3}, {1, 0});
  CHECK_STATUS(add.Run(h, out, a, b), Status::SUCCESS);
  sync();
  std::vector<float> want(12);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j)
      want[i * 3 + j] = f32(static_cast<double>(base[2 + j * 4 + i]) + 2.5 * vec[i]);
  check_floats(download<float>(po, 12), want, "a.T + 2.5 * b");

  // In place on the strided view itself: the output is also the first input.
  dnn::Binary add1;
  dnn::Tensor a_out = desc(Type::FLOAT, at<float>(pa, 2), {4, 3}, {1, 4});
  CHECK_STATUS(add1.Run(h, a_out, a, b), Status::SUCCESS);
  sync();
  std::vector<float> now = download<float>(pa, 14);
  std::vector<float> want_now = base;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) want_now[2 + j * 4 + i] = f32(double(base[2 + j * 4 + i]) + vec[i]);
  check_floats(now, want_now, "in-place a += b (untouched head kept)");

  // Integers: exact beyond a double's 53 bits; comparisons write BOOL.
  std::vector<int64_t> ia = {(int64_t{1} << 60) + 1, -7, 5}, ib = {3, 2, 5};
  void* pia = upload(ia);
  void* pib = upload(ib);
  void* pio = dalloc(3 * 8);
  void* pbo = dalloc(3);
  dnn::Binary sub;
  sub.SetMode(dnn::Binary::Mode::SUB);
  sub.SetAlpha(2);
  dnn::Tensor io = desc(Type::INT64, pio, {3});
  CHECK_STATUS(sub.Run(h, io, desc(Type::INT64, pia, {3}), desc(Type::INT64, pib, {3})),
               Status::SUCCESS);
  dnn::Binary ge;
  ge.SetMode(dnn::Binary::Mode::GE);
  dnn::Tensor bo = desc(Type::BOOL, pbo, {3});
  CHECK_STATUS(ge.Run(h, bo, desc(Type::INT64, pia, {3}), desc(Type::INT64, pib, {3})),
               Status::SUCCESS);
  sync();
  std::vector<int64_t> isub = download<int64_t>(pio, 3);
  CHECK(isub[0] == (int64_t{1} << 60) + 1 - 6 && isub[1] == -11 && isub[2] == -5);
  std::vector<uint8_t> ige = download<uint8_t>(pbo, 3);
  CHECK(ige[0] == 1 && ige[1] == 0 && ige[2] == 1);
  // A comparison into a non-BOOL output is outside the mode's types.
  CHECK_STATUS(ge.Run(h, io, desc(Type::INT64, pia, {3}), desc(Type::INT64, pib, {3})),
               Status::NOT_SUPPORTED);
  // MAXIMUM propagates NaN.
  std::vector<float> mx = {1.0f, NAN, 2.0f}, my = {NAN, 0.0f, 3.0f};
  void* pmx = upload(mx);
  void* pmy = upload(my);
  dnn::Binary maximum;
  maximum.SetMode(dnn::Binary::Mode::MAXIMUM);
  dnn::Tensor mo = desc(Type::FLOAT, po, {3});
  CHECK_STATUS(maximum.Run(h, mo, desc(Type::FLOAT, pmx, {3}), desc(Type::FLOAT, pmy, {3})),
               Status::SUCCESS);
  sync();
  check_floats(download<float>(po, 3), {NAN, NAN, 3.0f}, "maximum with NaN");
  for (void* p : {pa, pb, po, pia, pib, pio, pbo, pmx, pmy}) musaFree(p);
}

// Unary on a sliced view (every other element), GELU's erf form, integer NEG, LOGICAL_NOT.
static void case_unary() {
  std::vector<float> x(16);
  for (int i = 0; i < 16; ++i) x[i] = 0.3f * i - 2.0f;
  void* px = upload(x);
  void* po = dalloc(8 * 4);
  dnn::Handle h;
  dnn::Unary u;
  struct {
    dnn::Unary::Mode mode;
    std::function<double(double)> f;
    const char* name;
  } modes[] = {
      {dnn::Unary::Mode::EXP, [](double v) { return std::exp(v); }, "exp"},
      {dnn::Unary::Mode::GELU,
       [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }, "gelu"},
      {dnn::Unary::Mode::SIGMOID, [](double v) { return 1 / (1 + std::exp(-v)); }, "sigmoid"},
      {dnn::Unary::Mode::RELU, [](double v) { return v > 0 ? v : 0; }, "relu"},
  };
  for (auto& m : modes) {
    CHECK(u.SetMode(m.mode) == Status::SUCCESS);
    dnn::Tensor out = desc(Type::FLOAT, po, {8});
    CHECK_STATUS(u.Run(h, out, desc(Type::FLOAT, at<float>(px, 1), {8}, {2})), Status::SUCCESS);
    sync();
    std::vector<float> want(8);
    for (int i = 0; i < 8; ++i) want[i] = f32(m.f(static_cast<double>(x[1 + 2 * i])));
    check_floats(download<float>(po, 8), want, m.name);
  }
  // POW with alpha, in place.
  u.SetMode(dnn::Unary::Mode::POW);
  u.SetAlpha(2.0);
  dnn::Tensor inplace = desc(Type::FLOAT, px, {16});
  CHECK_STATUS(u.Run(h, inplace, inplace), Status::SUCCESS);
  sync();
  std::vector<float> sq(16);
  for (int i = 0; i < 16; ++i) sq[i] = f32(static_cast<double>(x[i]) * x[i]);
  check_floats(download<float>(px, 16), sq, "pow in place");

  std::vector<int64_t> iv = {(int64_t{1} << 62) + 3, -5, 0};
  void* piv = upload(iv);
  dnn::Unary neg;
  neg.SetMode(dnn::Unary::Mode::NEG);
  dnn::Tensor io = desc(Type::INT64, piv, {3});
  CHECK_STATUS(neg.Run(h, io, io), Status::SUCCESS);
  sync();
  std::vector<int64_t> ineg = download<int64_t>(piv, 3);
  CHECK(ineg[0] == -((int64_t{1} << 62) + 3) && ineg[1] == 5 && ineg[2] == 0);
  // EXP is floating only.
  dnn::Unary e;
  e.SetMode(dnn::Unary::Mode::EXP);
  CHECK_STATUS(e.Run(h, io, io), Status::NOT_SUPPORTED);

  std::vector<float> lv = {0.0f, 2.0f, NAN};
  void* plv = upload(lv);
  void* pbo = dalloc(3);
  dnn::Unary lnot;
  lnot.SetMode(dnn::Unary::Mode::LOGICAL_NOT);
  dnn::Tensor bo = desc(Type::BOOL, pbo, {3});
  CHECK_STATUS(lnot.Run(h, bo, desc(Type::FLOAT, plv, {3})), Status::SUCCESS);
  sync();
  std::vector<uint8_t> ln = download<uint8_t>(pbo, 3);
  CHECK(ln[0] == 1 && ln[1] == 0 && ln[2] == 0);
  for (void* p : {px, po, piv, plv, pbo}) musaFree(p);
}

// SELECT: a BOOL condition broadcast over rows, b transposed, c one scalar broadcast.
static void case_ternary_select() {
  std::vector<uint8_t> cond = {1, 0, 1};
  std::vector<float> b(6), c = {-9.0f};
  for (int i = 0; i < 6; ++i) b[i] = 1.5f * i;
  void* pc = upload(cond);
  void* pb = upload(b);
  void* pcc = upload(c);
  void* po = dalloc(6 * 4);
  dnn::Handle h;
  dnn::Ternary t;
  CHECK(t.SetMode(dnn::Ternary::Mode::SELECT) == Status::SUCCESS);
  dnn::Tensor out = desc(Type::FLOAT, po, {2, 3});
  CHECK_STATUS(t.Run(h, out, desc(Type::BOOL, pc, {2, 3}, {0, 1}),
                     desc(Type::FLOAT, pb, {2, 3}, {1, 2}), desc(Type::FLOAT, pcc, {2, 3}, {0, 0})),
               Status::SUCCESS);
  sync();
  std::vector<float> want(6);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) want[i * 3 + j] = cond[j] ? b[j * 2 + i] : c[0];
  check_floats(download<float>(po, 6), want, "where(cond, b.T, c)");
  // The condition must be BOOL.
  CHECK_STATUS(t.Run(h, out, desc(Type::FLOAT, pb, {2, 3}), desc(Type::FLOAT, pb, {2, 3}),
                     desc(Type::FLOAT, pb, {2, 3})),
               Status::NOT_SUPPORTED);
  // ADDCMUL with alpha.
  dnn::Ternary am;
  am.SetMode(dnn::Ternary::Mode::ADDCMUL);
  am.SetAlpha(0.5);
  CHECK_STATUS(am.Run(h, out, desc(Type::FLOAT, pb, {2, 3}), desc(Type::FLOAT, pb, {2, 3}, {1, 2}),
                      desc(Type::FLOAT, pcc, {2, 3}, {0, 0})),
               Status::SUCCESS);
  sync();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      want[i * 3 + j] = f32(double(b[i * 3 + j]) + 0.5 * double(b[j * 2 + i]) * double(c[0]));
  check_floats(download<float>(po, 6), want, "addcmul");
  for (void* p : {pc, pb, pcc, po}) musaFree(p);
}

// Reduce over dims 0 and 2 of a [2, 3, 4] view (a permuted [4, 3, 2] buffer): out [1, 3, 1].
static void case_reduce() {
  std::vector<float> buf(24);
  for (int i = 0; i < 24; ++i) buf[i] = 0.25f * i - 2.0f;
  // in[i][j][k] = buf[k * 6 + j * 2 + i]
  auto in_at = [&](int i, int j, int k) { return static_cast<double>(buf[k * 6 + j * 2 + i]); };
  void* pin = upload(buf);
  void* po = dalloc(3 * 4);
  dnn::Handle h;
  dnn::Tensor in = desc(Type::FLOAT, pin, {2, 3, 4}, {1, 2, 6});
  const int dims[] = {0, -1};
  struct {
    dnn::Reduce::Mode mode;
    const char* name;
  } modes[] = {{dnn::Reduce::Mode::ADD, "sum"},
               {dnn::Reduce::Mode::MEAN, "mean"},
               {dnn::Reduce::Mode::MAX, "max"}};
  for (auto& m : modes) {
    dnn::Reduce r;
    CHECK(r.SetMode(m.mode) == Status::SUCCESS);
    CHECK(r.SetDim(2, dims) == Status::SUCCESS);
    dnn::Tensor out = desc(Type::FLOAT, po, {1, 3, 1});
    CHECK_STATUS(r.Run(h, out, in, nullptr), Status::SUCCESS);
    sync();
    std::vector<float> want(3);
    for (int j = 0; j < 3; ++j) {
      double s = 0, mx = -INFINITY;
      for (int i = 0; i < 2; ++i)
        for (int k = 0; k < 4; ++k) {
          s += in_at(i, j, k);
          mx = std::fmax(mx, in_at(i, j, k));
        }
      want[j] = f32(m.mode == dnn::Reduce::Mode::ADD    ? s
                    : m.mode == dnn::Reduce::Mode::MEAN ? s / 8
                                                        : mx);
    }
    check_floats(download<float>(po, 3), want, m.name);
    // The reduced dims must be kept (of size 1).
    dnn::Tensor flat = desc(Type::FLOAT, po, {3});
    CHECK_STATUS(r.Run(h, flat, in, nullptr), Status::INVALID_PARAMETER);
  }
  // A maintainer is only asked for scratch the emulator does not need.
  dnn::Reduce r;
  r.SetMode(dnn::Reduce::Mode::MIN);
  r.SetDim(2, dims);
  int asked = 0;
  dnn::MemoryMaintainer mm = [&asked](size_t) {
    ++asked;
    return dnn::MemoryHandler(nullptr, [](void*) {});
  };
  dnn::Tensor out = desc(Type::FLOAT, po, {1, 3, 1});
  CHECK_STATUS(r.Run(h, out, in, mm), Status::SUCCESS);
  sync();
  // Integer sums are exact; AND into BOOL; NaN wins MAX.
  std::vector<int64_t> iv = {int64_t{1} << 55, 1, 1, -3};
  void* piv = upload(iv);
  void* pis = dalloc(8);
  dnn::Reduce isum;
  isum.SetMode(dnn::Reduce::Mode::ADD);
  const int d0[] = {0};
  isum.SetDim(1, d0);
  dnn::Tensor iout = desc(Type::INT64, pis, {1});
  CHECK_STATUS(isum.Run(h, iout, desc(Type::INT64, piv, {4}), nullptr), Status::SUCCESS);
  sync();
  CHECK(download<int64_t>(pis, 1)[0] == (int64_t{1} << 55) - 1);
  std::vector<float> nv = {1.0f, NAN, 3.0f};
  void* pnv = upload(nv);
  dnn::Reduce rmax;
  rmax.SetMode(dnn::Reduce::Mode::MAX);
  rmax.SetDim(1, d0);
  dnn::Tensor one = desc(Type::FLOAT, po, {1});
  CHECK_STATUS(rmax.Run(h, one, desc(Type::FLOAT, pnv, {3}), nullptr), Status::SUCCESS);
  sync();
  CHECK(std::isnan(download<float>(po, 1)[0]));
  // MAX of nothing is refused; an empty MEAN is NaN.
  CHECK_STATUS(rmax.Run(h, one, desc(Type::FLOAT, pnv, {0}), nullptr), Status::INVALID_PARAMETER);
  dnn::Reduce rmean;
  rmean.SetMode(dnn::Reduce::Mode::MEAN);
  rmean.SetDim(1, d0);
  CHECK_STATUS(rmean.Run(h, one, desc(Type::FLOAT, pnv, {0}), nullptr), Status::SUCCESS);
  sync();
  CHECK(std::isnan(download<float>(po, 1)[0]));
  CHECK(asked == 0);
  for (void* p : {pin, po, piv, pis, pnv}) musaFree(p);
}

// out [2, 4] = alpha * op(a) @ op(b) + beta * out, with a given as [K, M] (transposed) and b as a
// strided [N, K] view (transposed); then with a broadcast bias row, then batched.
static void case_matmul() {
  const int M = 2, K = 3, N = 4;
  std::vector<float> abuf(K * M), bbuf(N * 2 * K), obuf(M * N);
  for (int i = 0; i < K * M; ++i) abuf[i] = static_cast<float>(i) - 2.0f;
  for (int i = 0; i < N * 2 * K; ++i) bbuf[i] = 0.5f * static_cast<float>(i % 7) - 1.0f;
  for (int i = 0; i < M * N; ++i) obuf[i] = static_cast<float>(i);
  std::vector<float> bias = {1.0f, -2.0f, 0.25f, 8.0f};
  auto A = [&](int m, int k) { return static_cast<double>(abuf[k * M + m]); };      // a is [K, M]
  auto B = [&](int k, int n) { return static_cast<double>(bbuf[n * 2 * K + k]); };  // [N, K] / 2K
  void* pa = upload(abuf);
  void* pb = upload(bbuf);
  void* po = upload(obuf);
  void* pbias = upload(bias);
  dnn::Handle h;
  dnn::MatMul mm;
  CHECK(mm.SetTranspose(true, true) == Status::SUCCESS);
  mm.SetAlpha(2.0);
  mm.SetBeta(0.5);
  dnn::Tensor a = desc(Type::FLOAT, pa, {K, M});
  dnn::Tensor b = desc(Type::FLOAT, pb, {N, K}, {2 * K, 1});
  dnn::Tensor out = desc(Type::FLOAT, po, {M, N});
  CHECK_STATUS(mm.Run(h, out, a, b), Status::SUCCESS);
  sync();
  std::vector<float> want(M * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double s = 0;
      for (int k = 0; k < K; ++k) s += A(m, k) * B(k, n);
      want[m * N + n] = f32(2.0 * s + 0.5 * obuf[m * N + n]);
    }
  check_floats(download<float>(po, M * N), want, "2 * a.T @ b.T + 0.5 * out");

  mm.SetAlpha(1.0);
  mm.SetBeta(1.0);
  CHECK_STATUS(mm.RunWithBiasAdd(h, out, a, b, desc(Type::FLOAT, pbias, {M, N}, {0, 1})),
               Status::SUCCESS);
  sync();
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double s = 0;
      for (int k = 0; k < K; ++k) s += A(m, k) * B(k, n);
      want[m * N + n] = f32(s + bias[n]);
    }
  check_floats(download<float>(po, M * N), want, "a.T @ b.T + bias");
  // Inner dims must agree.
  dnn::MatMul plain;
  CHECK_STATUS(plain.Run(h, out, a, b), Status::INVALID_PARAMETER);

  // Batched: a broadcast over the batch (stride 0), b [2, K, N] contiguous.
  std::vector<float> bb(2 * K * N);
  for (int i = 0; i < 2 * K * N; ++i) bb[i] = static_cast<float>((i * 5) % 11) - 4.0f;
  void* pbb = upload(bb);
  void* pbo = dalloc(2 * M * N * 4);
  dnn::BatchMatMul bmm;
  bmm.SetTranspose(true, false);
  dnn::Tensor bout = desc(Type::FLOAT, pbo, {2, M, N});
  CHECK_STATUS(bmm.Run(h, bout, desc(Type::FLOAT, pa, {2, K, M}, {0, M, 1}),
                       desc(Type::FLOAT, pbb, {2, K, N})),
               Status::SUCCESS);
  sync();
  std::vector<float> bwant(2 * M * N);
  for (int p = 0; p < 2; ++p)
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        double s = 0;
        for (int k = 0; k < K; ++k) s += A(m, k) * bb[p * K * N + k * N + n];
        bwant[p * M * N + m * N + n] = f32(s);
      }
  check_floats(download<float>(pbo, 2 * M * N), bwant, "bmm");
  for (void* p : {pa, pb, po, pbias, pbb, pbo}) musaFree(p);
}

// Softmax and log-softmax over dim 0 of a transposed [3, 2] view, forward then backward.
static void case_softmax() {
  std::vector<float> x = {0.1f, -1.0f, 2.0f, 0.5f, 0.0f, 3.0f};  // [2, 3] contiguous
  std::vector<float> gy = {1.0f, -0.5f, 0.25f, 2.0f, 0.0f, -1.0f};
  void* px = upload(x);
  void* pgy = upload(gy);
  void* py = dalloc(6 * 4);
  void* pgx = dalloc(6 * 4);
  dnn::Handle h;
  for (auto mode : {dnn::Softmax::Mode::SOFTMAX, dnn::Softmax::Mode::LOGSOFTMAX}) {
    const bool log = mode == dnn::Softmax::Mode::LOGSOFTMAX;
    dnn::Softmax sm;
    CHECK(sm.SetMode(mode) == Status::SUCCESS);
    CHECK(sm.SetDim(0) == Status::SUCCESS);
    // in[i][j] = x[j * 3 + i], i over 3 (the softmax dim), j over 2.
    dnn::Tensor in = desc(Type::FLOAT, px, {3, 2}, {1, 3});
    dnn::Tensor y = desc(Type::FLOAT, py, {3, 2});
    CHECK_STATUS(sm.Run(h, y, in), Status::SUCCESS);
    sync();
    std::vector<float> got = download<float>(py, 6);
    std::vector<double> want(6), gwant(6);
    for (int j = 0; j < 2; ++j) {
      double mx = -INFINITY, s = 0;
      for (int i = 0; i < 3; ++i) mx = std::fmax(mx, x[j * 3 + i]);
      for (int i = 0; i < 3; ++i) s += std::exp(x[j * 3 + i] - mx);
      for (int i = 0; i < 3; ++i) {
        double v = x[j * 3 + i] - mx;
        want[i * 2 + j] = log ? v - std::log(s) : std::exp(v) / s;
      }
    }
    check_close(got, want, 1e-6, log ? "log_softmax" : "softmax");
    // Backward from the forward's (float) output; grad_out transposed as the input was.
    dnn::Tensor gx = desc(Type::FLOAT, pgx, {3, 2});
    CHECK_STATUS(sm.RunBwd(h, gx, y, desc(Type::FLOAT, pgy, {3, 2}, {1, 3})), Status::SUCCESS);
    sync();
    for (int j = 0; j < 2; ++j) {
      double s = 0;
      for (int i = 0; i < 3; ++i) s += log ? gy[j * 3 + i] : double(gy[j * 3 + i]) * got[i * 2 + j];
      for (int i = 0; i < 3; ++i) {
        double g = gy[j * 3 + i], yy = got[i * 2 + j];
        gwant[i * 2 + j] = log ? g - std::exp(yy) * s : yy * (g - s);
      }
    }
    check_close(download<float>(pgx, 6), gwant, 1e-6, log ? "log_softmax bwd" : "softmax bwd");
    sm.SetDim(2);
    CHECK_STATUS(sm.Run(h, y, in), Status::INVALID_PARAMETER);
  }
  for (void* p : {px, pgy, py, pgx}) musaFree(p);
}

// HALF and BFLOAT16 results round to nearest even from the exact value, not through float.
static void case_half_bf16_rounding() {
  dnn::Handle h;
  // x * alpha with x = 1: the product is alpha itself.
  struct {
    double alpha;
    uint16_t half, bf16;
  } rows[] = {
      {1.0 + std::ldexp(1.0, -11), 0x3c00, 0x3f80},                         // half tie: even
      {1.0 + 3 * std::ldexp(1.0, -11), 0x3c02, 0x3f80},                     // half tie: up
      {1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -30), 0x3c01, 0x3f80},  // above the tie
      {1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30), 0x3c04, 0x3f81},   // bf16 above the tie
      {65519.0, 0x7bff, 0x4780},                                            // largest half
      {65520.0, 0x7c00, 0x4780},                                            // half overflow
      {std::ldexp(1.0, -25), 0x0000, 0x3300},                               // half tie to 0
      {3 * std::ldexp(1.0, -26), 0x0001, 0x3340},                           // half subnormal
      {-2.5, 0xc100, 0xc020},
  };
  const size_t n = sizeof rows / sizeof rows[0];
  std::vector<uint16_t> one_h(n, 0x3c00), one_b(n, 0x3f80);
  void* ph = upload(one_h);
  void* pb = upload(one_b);
  for (size_t i = 0; i < n; ++i) {
    dnn::Unary mul;
    mul.SetMode(dnn::Unary::Mode::MUL);
    mul.SetAlpha(rows[i].alpha);
    dnn::Tensor eh = desc(Type::HALF, at<uint16_t>(ph, i), {1});
    dnn::Tensor eb = desc(Type::BFLOAT16, at<uint16_t>(pb, i), {1});
    CHECK_STATUS(mul.Run(h, eh, eh), Status::SUCCESS);
    CHECK_STATUS(mul.Run(h, eb, eb), Status::SUCCESS);
  }
  sync();
  std::vector<uint16_t> gh = download<uint16_t>(ph, n), gb = download<uint16_t>(pb, n);
  for (size_t i = 0; i < n; ++i) {
    if (gh[i] != rows[i].half || gb[i] != rows[i].bf16) {
      std::printf("FAIL alpha %.17g: half 0x%04x (%g) want 0x%04x, bf16 0x%04x want 0x%04x\n",
                  rows[i].alpha, gh[i], half_bits_to_float(gh[i]), rows[i].half, gb[i],
                  rows[i].bf16);
      ++g_failures;
    }
  }
  // Fill: a double rounds the same way; an int64 reaches INT64 exactly.
  dnn::Fill fill;
  fill.SetValue(1.0 + 3 * std::ldexp(1.0, -11));
  dnn::Tensor eh = desc(Type::HALF, ph, {2});
  CHECK_STATUS(fill.Run(h, eh), Status::SUCCESS);
  void* pi = dalloc(2 * 8);
  fill.SetValue(static_cast<int64_t>((int64_t{1} << 62) + 1));
  dnn::Tensor ei = desc(Type::INT64, pi, {2});
  CHECK_STATUS(fill.Run(h, ei), Status::SUCCESS);
  sync();
  std::vector<uint16_t> fh = download<uint16_t>(ph, 2);
  CHECK(fh[0] == 0x3c02 && fh[1] == 0x3c02);
  std::vector<int64_t> fi = download<int64_t>(pi, 2);
  CHECK(fi[0] == (int64_t{1} << 62) + 1 && fi[1] == fi[0]);
  for (void* p : {ph, pb, pi}) musaFree(p);
}

// DOUBLE is no operator's type: NOT_SUPPORTED, nothing queued, no violation.
static void case_double_not_supported() {
  void* p = dalloc(64);
  dnn::Handle h;
  dnn::Tensor d = desc(Type::DOUBLE, p, {4});
  const uint64_t before = musaEmuViolationCount();
  dnn::Binary add;
  CHECK_STATUS(add.Run(h, d, d, d), Status::NOT_SUPPORTED);
  dnn::Unary u;
  u.SetMode(dnn::Unary::Mode::NEG);
  CHECK_STATUS(u.Run(h, d, d), Status::NOT_SUPPORTED);
  dnn::Fill f;
  CHECK_STATUS(f.Run(h, d), Status::NOT_SUPPORTED);
  dnn::Reduce r;
  const int d0[] = {0};
  r.SetDim(1, d0);
  dnn::Tensor d1 = desc(Type::DOUBLE, p, {1});
  CHECK_STATUS(r.Run(h, d1, d, nullptr), Status::NOT_SUPPORTED);
  dnn::MatMul mm;
  dnn::Tensor m = desc(Type::DOUBLE, p, {2, 2});
  CHECK_STATUS(mm.Run(h, m, m, m), Status::NOT_SUPPORTED);
  dnn::Softmax sm;
  CHECK_STATUS(sm.Run(h, d, d), Status::NOT_SUPPORTED);
  CHECK(musaEmuViolationCount() == before);
  sync();
  musaFree(p);
}

// A descriptor reaching past its allocation, and an output overlapping itself, are refused
// before anything is queued, each recorded as a violation.
static void case_out_of_allocation() {
  void* p = dalloc(8 * 4);
  void* q = dalloc(8 * 4);
  dnn::Handle h;
  dnn::Binary add;
  dnn::Tensor out = desc(Type::FLOAT, q, {8});
  uint64_t before = musaEmuViolationCount();
  CHECK_STATUS(add.Run(h, out, desc(Type::FLOAT, p, {8}), desc(Type::FLOAT, p, {8}, {2})),
               Status::INVALID_PARAMETER);
  CHECK(musaEmuViolationCount() == before + 1);
  std::string msg = musaEmuLastViolation();
  CHECK(msg.find("Binary::Run") != std::string::npos);
  CHECK(msg.find(" b ") != std::string::npos);
  std::printf("violation: %s\n", msg.c_str());
  // An output with a zero stride writes one element twice.
  dnn::Tensor bad = desc(Type::FLOAT, q, {8}, {0});
  CHECK_STATUS(add.Run(h, bad, desc(Type::FLOAT, p, {8}), desc(Type::FLOAT, p, {8})),
               Status::INVALID_PARAMETER);
  CHECK(musaEmuViolationCount() == before + 2);
  CHECK(std::string(musaEmuLastViolation()).find("overlaps itself") != std::string::npos);
  sync();
  musaFree(p);
  musaFree(q);
}

// The handle's device must be current at Run.
static void case_wrong_device() {
  CHECK(musaSetDevice(0) == musaSuccess);
  void* p = dalloc(16);
  dnn::Handle h;  // device 0
  CHECK(h.GetDeviceId() == 0);
  dnn::Handle h1(1);
  musaStream_t s0 = nullptr;
  CHECK(musaStreamCreate(&s0) == musaSuccess);
  CHECK_STATUS(h1.SetStream(s0), Status::INVALID_PARAMETER);  // device 0's stream
  CHECK_STATUS(h.SetStream(s0), Status::SUCCESS);
  CHECK(musaSetDevice(1) == musaSuccess);
  dnn::Tensor t = desc(Type::FLOAT, p, {4});
  dnn::Unary u;
  const uint64_t before = musaEmuViolationCount();
  CHECK_STATUS(u.Run(h, t, t), Status::INVALID_PARAMETER);
  CHECK(musaEmuViolationCount() == before + 1);
  std::string msg = musaEmuLastViolation();
  CHECK(msg.find("Unary::Run") != std::string::npos);
  std::printf("violation: %s\n", msg.c_str());
  CHECK(musaSetDevice(0) == musaSuccess);
  CHECK_STATUS(u.Run(h, t, t), Status::SUCCESS);
  CHECK(musaStreamSynchronize(s0) == musaSuccess);
  CHECK(musaStreamDestroy(s0) == musaSuccess);
  musaFree(p);
}

// Work still queued when its memory is freed fails the stream at the next synchronisation; the
// work queued before it on the stream ran.
static void case_freed_before_sync() {
  void* p = dalloc(64 * 4);
  void* q = upload(std::vector<float>(4, 0.0f));
  musaStream_t s = nullptr;
  CHECK(musaStreamCreate(&s) == musaSuccess);
  dnn::Handle h;
  CHECK(h.SetStream(s) == Status::SUCCESS);
  CHECK(musaEmuHoldStream(s) == musaSuccess);  // what is queued from now on waits
  dnn::Fill fill;
  fill.SetValue(2.0);
  dnn::Tensor tq = desc(Type::FLOAT, q, {4});
  CHECK_STATUS(fill.Run(h, tq), Status::SUCCESS);
  dnn::Tensor t = desc(Type::FLOAT, p, {64});
  CHECK_STATUS(fill.Run(h, t), Status::SUCCESS);
  CHECK(musaFree(p) == musaSuccess);
  CHECK(musaEmuReleaseStream(s) == musaSuccess);
  musaError_t e = musaStreamSynchronize(s);
  std::printf("sync after free: %d\n", static_cast<int>(e));
  CHECK(e == musaErrorIllegalAddress);
  check_floats(download<float>(q, 4), std::vector<float>(4, 2.0f), "the work before it ran");
  CHECK(musaStreamDestroy(s) == musaSuccess);
  musaFree(q);
}

// An injected fault is the Run's status, and the op does nothing.
static void case_injected_fault() {
  std::vector<float> x = {1.0f, 2.0f};
  void* px = upload(x);
  void* po = upload(std::vector<float>{-1.0f, -1.0f});
  dnn::Handle h;
  dnn::Binary add;
  dnn::Tensor out = desc(Type::FLOAT, po, {2}), in = desc(Type::FLOAT, px, {2});
  CHECK(musaEmuInjectFault("Binary::Run", 1, 7) == 0);
  CHECK_STATUS(add.Run(h, out, in, in), Status::EXECUTION_FAILED);
  sync();
  check_floats(download<float>(po, 2), {-1.0f, -1.0f}, "nothing written");
  CHECK_STATUS(add.Run(h, out, in, in), Status::SUCCESS);
  sync();
  check_floats(download<float>(po, 2), {2.0f, 4.0f}, "the next call runs");
  CHECK(musaEmuCallCount("Binary::Run") == 2);
  musaFree(px);
  musaFree(po);
}

int main(int argc, char** argv) {
  const std::map<std::string, void (*)()> cases = {
      {"binary_add_strided", case_binary_add_strided},
      {"unary", case_unary},
      {"ternary_select", case_ternary_select},
      {"reduce", case_reduce},
      {"matmul", case_matmul},
      {"softmax", case_softmax},
      {"half_bf16_rounding", case_half_bf16_rounding},
      {"double_not_supported", case_double_not_supported},
      {"out_of_allocation", case_out_of_allocation},
      {"wrong_device", case_wrong_device},
      {"freed_before_sync", case_freed_before_sync},
      {"injected_fault", case_injected_fault},
  };
  if (argc != 2 || cases.find(argv[1]) == cases.end()) {
    std::printf("usage: %s CASE; cases:", argv[0]);
    for (auto& c : cases) std::printf(" %s", c.first.c_str());
    std::printf("\n");
    return 2;
  }
  musaEmuReset();
  CHECK(musaSetDevice(0) == musaSuccess);
  cases.at(argv[1])();
  std::printf("DONE %d\n", g_failures);
  return g_failures == 0 ? 0 : 1;
}
