#include "glue/mirror/mirror_generators.h"

#include <ATen/Context.h>

namespace torch_fl::mirror {
namespace {

class MirrorGenerators final : public GeneratorSource {
 public:
  explicit MirrorGenerators(c10::DeviceType type) : type_(type) {}
  at::Generator make_default(c10::DeviceIndex device) const override {
    return at::make_generator<FlagosGeneratorImpl>(
        device, at::globalContext().defaultGenerator(c10::Device(type_, device)));
  }
  at::Generator make_new(c10::DeviceIndex device) const override {
    return at::make_generator<FlagosGeneratorImpl>(
        device, at::globalContext().getAcceleratorHooksInterface(type_).getNewGenerator(device));
  }

 private:
  c10::DeviceType type_;
};

}  // namespace

const GeneratorSource* mirror_generators(c10::DeviceType type) {
  return new MirrorGenerators(type);
}

}  // namespace torch_fl::mirror
