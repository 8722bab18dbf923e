// libmudnn.so internals shared by its operator files (not SDK API). An operator's Run validates
// its configuration, then a Launch checks the outputs, the current device and every operand's
// memory and queues the computation on the handle's stream: the compute function runs later, on
// the stream's worker, against host views of the operands.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "mudnn.h"
#include "musa_emu_internal.h"

namespace musa {
namespace dnn {
// Hidden: the library exports the SDK's classes, and only them.
namespace emu __attribute__((visibility("hidden"))) {

  using Type = Tensor::Type;

  // Counts a call of `name` ("Binary::Run"); the fault injected for it (SUCCESS: none).
  Status enter(const char* name);

  bool valid_type(Type t);
  size_t elem_size(Type t);
  // FLOAT, HALF, BFLOAT16 (DOUBLE is a floating type no operator supports).
  bool is_floating(Type t);
  bool is_int(Type t);  // INT32 or INT64, the integer types most modes take
  const char* type_name(Type t);

  float half_to_float(uint16_t h);
  float bf16_to_float(uint16_t b);
  // Rounded to nearest even from the double itself (no double rounding through float).
  uint16_t double_to_half(double v);
  uint16_t double_to_bf16(double v);

  // An element at `off` elements from `base`. Floating values load through float for HALF and
  // BFLOAT16; integer stores wrap (two's complement), BOOL stores 0/1, stores of a double into an
  // integer type truncate (NaN 0, saturating).
  double load_f(const char* base, Type t, int64_t off);
  int64_t load_i(const char* base, Type t, int64_t off);
  void store_f(char* base, Type t, int64_t off, double v);
  void store_i(char* base, Type t, int64_t off, int64_t v);

  // Calls f(offset) for every element of dims/strides (elements) in row-major order.
  template <typename F>
  void for_each_offset(int nd, const int64_t* dims, const int64_t* strides, F f) {
    int64_t n = 1;
    for (int d = 0; d < nd; ++d) n *= dims[d];
    if (n == 0) return;
    int64_t idx[Tensor::kMaxDims] = {};
    int64_t off = 0;
    for (int64_t i = 0; i < n; ++i) {
      f(off);
      for (int d = nd - 1; d >= 0; --d) {
        if (++idx[d] < dims[d]) {
          off += strides[d];
          break;
        }
        off -= (dims[d] - 1) * strides[d];
        idx[d] = 0;
      }
    }
  }

  bool same_dims(const Tensor& a, const Tensor& b);
  // Min and max element offsets a descriptor touches; false on arithmetic overflow.
  bool offset_span(const Tensor& t, int64_t* lo, int64_t* hi);
  // Whether two elements of the descriptor share memory (a zero or interleaved stride).
  bool self_overlaps(const Tensor& t);
  // Whether the byte ranges two non-empty descriptors span (lowest to highest element) intersect;
  // `same` is set where they describe exactly the same elements (address, dims, strides, type).
  bool spans_overlap(const Tensor& a, const Tensor& b, bool* same = nullptr);
  // An integral alpha for an integer mode; false when it has a fraction or is out of range.
  bool integral_alpha(double alpha, int64_t* out);

  // An operand as the compute function sees it: host memory behind its device address.
  struct View {
    Tensor t;
    char* base = nullptr;  // host address of element 0; nullptr for an empty tensor

    Type type() const { return t.GetType(); }
    int nd() const { return t.GetNdims(); }
    const int64_t* dims() const { return t.GetDims(); }
    int64_t numel() const { return t.GetElementCount(); }
    // Every element in row-major order, as double or as int64.
    std::vector<double> gather_f() const;
    std::vector<int64_t> gather_i() const;
    // Writes vals (row-major) into the elements.
    void scatter_f(const std::vector<double>& vals) const;
    void scatter_i(const std::vector<int64_t>& vals) const;
  };

  // The queued half of a Run: add the operands, then submit the computation.
  class Launch {
   public:
    Launch(const char* op, Handle& h) : op_(op), h_(h) {}
    // Operands in the order the compute function receives them; `role` names them in messages.
    void input(const Tensor& t, const char* role) { ops_.push_back({t, role, false}); }
    void output(const Tensor& t, const char* role) { ops_.push_back({t, role, true}); }
    // Checks that no output overlaps itself, that the handle's device is current and that every
    // operand lies in a live allocation, then queues `compute`. Nothing is queued on failure.
    Status submit(std::function<void(const std::vector<View>&)> compute);

   private:
    struct Op {
      Tensor t;
      const char* role;
      bool output;
    };
    const char* op_;
    Handle& h_;
    std::vector<Op> ops_;
  };

}  // namespace emu
}  // namespace dnn
}  // namespace musa
