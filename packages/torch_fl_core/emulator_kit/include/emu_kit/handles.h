// The live handles of one kind (streams, events): an SDK handle is the object's address and is
// valid only while listed, so a destroyed or made-up handle is caught instead of dereferenced.
#pragma once

#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace emu_kit {

template <class T>
class HandleTable {
 public:
  // Lists the object; its address is the handle.
  T* add(std::shared_ptr<T> obj) {
    T* h = obj.get();
    std::lock_guard<std::mutex> lk(mu_);
    live_[h] = std::move(obj);
    return h;
  }
  std::shared_ptr<T> find(const void* h) const {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = live_.find(h);
    return it == live_.end() ? nullptr : it->second;
  }
  // Takes the object out of the table (nullptr: not a live handle).
  std::shared_ptr<T> remove(const void* h) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = live_.find(h);
    if (it == live_.end()) return nullptr;
    std::shared_ptr<T> obj = std::move(it->second);
    live_.erase(it);
    return obj;
  }
  std::vector<std::shared_ptr<T>> all() const {
    std::lock_guard<std::mutex> lk(mu_);
    std::vector<std::shared_ptr<T>> out;
    out.reserve(live_.size());
    for (const auto& kv : live_) out.push_back(kv.second);
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<const void*, std::shared_ptr<T>> live_;
};

}  // namespace emu_kit
