// The compute dtypes an SDK kernel serves (the ops table's `dtypes`), and declining the others.
#ifndef TORCH_FL_KIT_DTYPE_SET_H_
#define TORCH_FL_KIT_DTYPE_SET_H_

#include <c10/core/ScalarType.h>
#include <torch_fl/kit/kernel_call.h>

#include <initializer_list>
#include <string>
#include <vector>

namespace torch_fl::kit {

class DtypeSet {
 public:
  DtypeSet(std::initializer_list<at::ScalarType> types) : types_(types) {}
  bool has(at::ScalarType t) const {
    for (at::ScalarType x : types_)
      if (x == t) return true;
    return false;
  }
  std::string text() const {
    std::string s;
    for (at::ScalarType x : types_) {
      if (!s.empty()) s += ", ";
      s += c10::toString(x);
    }
    return s;
  }

 private:
  std::vector<at::ScalarType> types_;
};

// Declines the call unless `dtypes` has `t` (core then serves it with its counted CPU fallback);
// `fn` names the SDK kernel.
inline void need_dtype(const KernelCall& c, const DtypeSet& dtypes, at::ScalarType t,
                       const char* fn) {
  if (!dtypes.has(t)) {
    c.decline(std::string("compute dtype ") + c10::toString(t) + " has no " + fn +
              " kernel (it serves " + dtypes.text() + ")");
  }
}

}  // namespace torch_fl::kit

#endif  // TORCH_FL_KIT_DTYPE_SET_H_
