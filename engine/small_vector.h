#pragma once
// A std::vector look-alike that keeps up to N elements inline and uses the heap only beyond.
// Shapes, strides and batch tags are a handful of elements each; as std::vectors they cost a
// malloc/free per copy, about a third of a small vmap call.
#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace td {

template <class T, size_t N>
class SmallVector {
  // Elements are moved with memcpy and never destroyed one by one.
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_default_constructible_v<T>);
  static_assert(N > 0);

 public:
  using value_type = T;
  using size_type = size_t;
  using difference_type = ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = T*;
  using const_iterator = const T*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  SmallVector() noexcept {}
  explicit SmallVector(size_type n) { resize(n); }
  SmallVector(size_type n, const T& value) { assign(n, value); }
  template <std::input_iterator It>
  SmallVector(It first, It last) {
    assign(first, last);
  }
  SmallVector(std::initializer_list<T> il) { assign(il.begin(), il.end()); }
  // Implicit both ways, so code written against std::vector<T> keeps compiling.
  SmallVector(const std::vector<T>& v) { assign(v.begin(), v.end()); }
  operator std::vector<T>() const { return std::vector<T>(begin(), end()); }

  SmallVector(const SmallVector& o) { assign(o.begin(), o.end()); }
  SmallVector(SmallVector&& o) noexcept { take(o); }
  ~SmallVector() { release(); }

  SmallVector& operator=(const SmallVector& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  SmallVector& operator=(SmallVector&& o) noexcept {
    if (this != &o) {
      release();
      take(o);
    }
    return *this;
  }
  SmallVector& operator=(std::initializer_list<T> il) {
    assign(il.begin(), il.end());
    return *this;
  }
  SmallVector& operator=(const std::vector<T>& v) {
    assign(v.begin(), v.end());
    return *this;
  }

  void assign(size_type n, const T& value) {
    const T v = value;  // value may live in this vector
    if (n > cap_) grow_exact(n, 0);
    std::fill_n(data_, n, v);
    size_ = static_cast<uint32_t>(n);
  }
  template <std::input_iterator It>
  void assign(It first, It last) {
    if constexpr (std::forward_iterator<It>) {
      const size_type n = static_cast<size_type>(std::distance(first, last));
      if (n > cap_) grow_exact(n, 0);  // a larger range cannot alias this storage
      if constexpr (std::contiguous_iterator<It>) {
        if (n) std::memmove(data_, std::to_address(first), n * sizeof(T));
      } else {
        std::copy(first, last, data_);
      }
      size_ = static_cast<uint32_t>(n);
    } else {
      clear();
      for (; first != last; ++first) push_back(*first);
    }
  }
  void assign(std::initializer_list<T> il) { assign(il.begin(), il.end()); }

  // element access
  T& operator[](size_type i) { return data_[i]; }
  const T& operator[](size_type i) const { return data_[i]; }
  T& at(size_type i) {
    check_index(i);
    return data_[i];
  }
  const T& at(size_type i) const {
    check_index(i);
    return data_[i];
  }
  T& front() { return data_[0]; }
  const T& front() const { return data_[0]; }
  T& back() { return data_[size_ - 1]; }
  const T& back() const { return data_[size_ - 1]; }
  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }

  // iterators
  iterator begin() noexcept { return data_; }
  const_iterator begin() const noexcept { return data_; }
  const_iterator cbegin() const noexcept { return data_; }
  iterator end() noexcept { return data_ + size_; }
  const_iterator end() const noexcept { return data_ + size_; }
  const_iterator cend() const noexcept { return data_ + size_; }
  reverse_iterator rbegin() noexcept { return reverse_iterator(end()); }
  const_reverse_iterator rbegin() const noexcept { return const_reverse_iterator(end()); }
  const_reverse_iterator crbegin() const noexcept { return rbegin(); }
  reverse_iterator rend() noexcept { return reverse_iterator(begin()); }
  const_reverse_iterator rend() const noexcept { return const_reverse_iterator(begin()); }
  const_reverse_iterator crend() const noexcept { return rend(); }

  // capacity
  bool empty() const noexcept { return size_ == 0; }
  size_type size() const noexcept { return size_; }
  size_type capacity() const noexcept { return cap_; }
  static constexpr size_type max_size() noexcept { return UINT32_MAX; }
  static constexpr size_type inline_capacity() noexcept { return N; }
  void reserve(size_type n) {
    if (n > cap_) grow_exact(n, size_);
  }
  void shrink_to_fit() {}

  // modifiers
  void clear() noexcept { size_ = 0; }
  void push_back(const T& value) {
    if (size_ == cap_) {
      const T v = value;  // value may live in this vector
      grow(size_ + 1);
      data_[size_++] = v;
    } else {
      data_[size_++] = value;
    }
  }
  template <class... Args>
  T& emplace_back(Args&&... args) {
    push_back(T(std::forward<Args>(args)...));
    return back();
  }
  void pop_back() { --size_; }
  void resize(size_type n) { resize(n, T{}); }
  void resize(size_type n, const T& value) {
    if (n > size_) {
      const T v = value;
      if (n > cap_) grow(n);
      std::fill(data_ + size_, data_ + n, v);
    }
    size_ = static_cast<uint32_t>(n);
  }

  iterator insert(const_iterator pos, const T& value) { return insert(pos, size_type{1}, value); }
  iterator insert(const_iterator pos, size_type n, const T& value) {
    const T v = value;  // value may live in this vector
    const size_type i = open_gap(pos, n);
    std::fill_n(data_ + i, n, v);
    return data_ + i;
  }
  template <std::input_iterator It>
  iterator insert(const_iterator pos, It first, It last) {
    if constexpr (std::contiguous_iterator<It>) {
      const T* f = std::to_address(first);
      const size_type n = static_cast<size_type>(last - first);
      if (f + n > data_ && f < data_ + size_) {  // inserting a piece of itself: copy it first
        SmallVector tmp(f, f + n);
        return insert(pos, tmp.begin(), tmp.end());
      }
      const size_type i = open_gap(pos, n);
      if (n) std::memcpy(data_ + i, f, n * sizeof(T));
      return data_ + i;
    } else {
      // Other iterators may also walk this vector (reverse_iterator) or be single-pass.
      SmallVector tmp(first, last);
      return insert(pos, tmp.begin(), tmp.end());
    }
  }
  iterator insert(const_iterator pos, std::initializer_list<T> il) {
    return insert(pos, il.begin(), il.end());
  }
  template <class... Args>
  iterator emplace(const_iterator pos, Args&&... args) {
    return insert(pos, T(std::forward<Args>(args)...));
  }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    const size_type i = static_cast<size_type>(first - data_);
    const size_type n = static_cast<size_type>(last - first);
    if (n) {
      std::memmove(data_ + i, data_ + i + n, (size_ - i - n) * sizeof(T));
      size_ -= static_cast<uint32_t>(n);
    }
    return data_ + i;
  }
  void swap(SmallVector& o) noexcept {
    SmallVector tmp(std::move(o));
    o = std::move(*this);
    *this = std::move(tmp);
  }
  friend void swap(SmallVector& a, SmallVector& b) noexcept { a.swap(b); }

  // comparison, also against std::vector<T> in either order (C++20 rewrites the reversed one)
  friend bool operator==(const SmallVector& a, const SmallVector& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const SmallVector& a, const std::vector<T>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend auto operator<=>(const SmallVector& a, const SmallVector& b) {
    return std::lexicographical_compare_three_way(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  bool is_inline() const noexcept { return data_ == inline_; }
  void release() noexcept {
    if (!is_inline()) ::operator delete(data_);
  }
  // Leaves o empty and inline.
  void take(SmallVector& o) noexcept {
    if (o.is_inline()) {
      data_ = inline_;
      cap_ = N;
      // The clamp is a no-op; it tells GCC the copy stays within the inline buffer.
      std::memcpy(inline_, o.inline_, std::min<size_type>(o.size_, N) * sizeof(T));
    } else {
      data_ = o.data_;
      cap_ = o.cap_;
      o.data_ = o.inline_;
      o.cap_ = N;
    }
    size_ = o.size_;
    o.size_ = 0;
  }
  void grow(size_type min_cap) { grow_exact(std::max<size_type>(min_cap, 2 * size_type{cap_}), size_); }
  // New storage of capacity cap keeping the first `keep` elements.
  void grow_exact(size_type cap, size_type keep) {
    if (cap > max_size()) throw std::length_error("td::SmallVector: too many elements");
    T* p = static_cast<T*>(::operator new(cap * sizeof(T)));
    if (keep) std::memcpy(p, data_, keep * sizeof(T));
    release();
    data_ = p;
    cap_ = static_cast<uint32_t>(cap);
  }
  // Makes room for n elements at pos; returns pos's index.
  size_type open_gap(const_iterator pos, size_type n) {
    const size_type i = static_cast<size_type>(pos - data_);
    if (size_ + n > cap_) grow(size_ + n);
    if (n) std::memmove(data_ + i + n, data_ + i, (size_ - i) * sizeof(T));
    size_ += static_cast<uint32_t>(n);
    return i;
  }
  void check_index(size_type i) const {
    if (i >= size_) throw std::out_of_range("td::SmallVector::at: index out of range");
  }

  T* data_ = inline_;
  uint32_t size_ = 0;
  uint32_t cap_ = N;
  T inline_[N];
};

}  // namespace td
