#pragma once
// A vector whose first N elements live inside it: no allocation until it grows past them. The
// decision path keeps a few lists per call (its requests' costs and starts, the pending ones, the
// breakers they go through) that hold one element for every single consume(); as std::vectors they
// were four of its heap allocations (benchmarks/micro_bench.cpp counts them: `allocs`). For
// trivially copyable elements only, which it copies as bytes; the operations the path uses, with
// std::vector's meaning.
#include <algorithm>
#include <cstddef>
#include <iterator>
#include <memory>
#include <type_traits>

namespace redlimit::detail {

template <class T, std::size_t N>
class SmallVector {
  static_assert(std::is_trivially_copyable_v<T> && std::is_default_constructible_v<T>,
                "SmallVector holds trivially copyable elements");
  static_assert(N > 0, "SmallVector needs room for an element");

 public:
  SmallVector() = default;
  template <class It>
  SmallVector(It first, It last) {
    reserve(static_cast<std::size_t>(std::distance(first, last)));
    for (; first != last; ++first) data()[size_++] = *first;
  }
  SmallVector(const SmallVector& other) { *this = other; }
  SmallVector& operator=(const SmallVector& other) {
    if (this != &other) {
      size_ = 0;
      reserve(other.size_);
      std::copy_n(other.data(), other.size_, data());
      size_ = other.size_;
    }
    return *this;
  }
  ~SmallVector() = default;  // (a move copies: the elements are bytes)

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return heap_ ? heap_.get() : inline_; }
  const T* data() const { return heap_ ? heap_.get() : inline_; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  T& operator[](std::size_t i) { return data()[i]; }
  const T& operator[](std::size_t i) const { return data()[i]; }
  T& front() { return data()[0]; }
  const T& front() const { return data()[0]; }
  T& back() { return data()[size_ - 1]; }
  const T& back() const { return data()[size_ - 1]; }

  void reserve(std::size_t n) {
    if (n <= capacity_) return;
    std::unique_ptr<T[]> grown(new T[n]);
    std::copy_n(data(), size_, grown.get());
    heap_ = std::move(grown);
    capacity_ = n;
  }
  void push_back(const T& v) {
    if (size_ == capacity_) {
      const T copy = v;  // `v` may be an element of this vector, which reserve() moves
      reserve(2 * capacity_);
      data()[size_++] = copy;
      return;
    }
    data()[size_++] = v;
  }
  // Shrinks, or grows with value-initialised elements.
  void resize(std::size_t n) {
    reserve(n);
    if (n > size_) std::fill(data() + size_, data() + n, T{});
    size_ = n;
  }
  void assign(std::size_t n, const T& v) {
    const T copy = v;
    size_ = 0;
    reserve(n);
    std::fill_n(data(), n, copy);
    size_ = n;
  }
  void clear() { size_ = 0; }

 private:
  T inline_[N]{};
  std::unique_ptr<T[]> heap_;  // past N elements
  std::size_t size_ = 0;
  std::size_t capacity_ = N;
};

}  // namespace redlimit::detail
