// Internal: scalar arithmetic that kernels write once for real and complex element types.
// Complex values are a plain {x, y} pair, layout-compatible with std::complex and cuComplex; the
// operations are the textbook ones (no C99 Annex G inf/nan recovery), which is what LAPACK does.
#pragma once

#include <cuda_runtime.h>

#include <cstring>
#include <type_traits>

#include "covflow/linalg/cuda/warp.cuh"
#include "covflow/linalg/types.hpp"

namespace covflow::linalg::detail {

template <class R>
struct alignas(2 * sizeof(R)) Cx {
  R x, y;
};

// Host element type -> device element type.
template <class T> struct device_type { using type = T; };
template <> struct device_type<cf32> { using type = Cx<float>; };
template <> struct device_type<cf64> { using type = Cx<double>; };
template <class T> using device_t = typename device_type<T>::type;

// Host pointer or value → its device element type (same bytes: Cx is layout-compatible with
// std::complex), for passing the caller's arrays and scalars to kernels.
template <class T>
device_t<std::remove_const_t<T>>* dev(T* p) {
  return reinterpret_cast<device_t<std::remove_const_t<T>>*>(const_cast<std::remove_const_t<T>*>(p));
}
template <class T>
device_t<T> to_device(T value) {
  device_t<T> out;
  std::memcpy(&out, &value, sizeof(out));
  return out;
}

template <class T> struct scalar_real { using type = T; };
template <class R> struct scalar_real<Cx<R>> { using type = R; };
template <class T> using sreal_t = typename scalar_real<T>::type;

template <class T> inline constexpr bool is_cx = false;
template <class R> inline constexpr bool is_cx<Cx<R>> = true;

template <class R> __host__ __device__ inline R real_part(R v) { return v; }
template <class R> __host__ __device__ inline R real_part(Cx<R> v) { return v.x; }
template <class R> __host__ __device__ inline R imag_part(R) { return R(0); }
template <class R> __host__ __device__ inline R imag_part(Cx<R> v) { return v.y; }
template <class R> __host__ __device__ inline R conj_of(R v) { return v; }
template <class R> __host__ __device__ inline Cx<R> conj_of(Cx<R> v) { return {v.x, -v.y}; }
template <class R> __host__ __device__ inline R abs2(R v) { return v * v; }
template <class R> __host__ __device__ inline R abs2(Cx<R> v) { return v.x * v.x + v.y * v.y; }

template <class R> __host__ __device__ inline Cx<R> operator+(Cx<R> a, Cx<R> b) { return {a.x + b.x, a.y + b.y}; }
template <class R> __host__ __device__ inline Cx<R> operator-(Cx<R> a, Cx<R> b) { return {a.x - b.x, a.y - b.y}; }
template <class R> __host__ __device__ inline Cx<R> operator-(Cx<R> a) { return {-a.x, -a.y}; }
template <class R> __host__ __device__ inline Cx<R> operator*(Cx<R> a, Cx<R> b) {
  return {a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x};
}
template <class R> __host__ __device__ inline Cx<R> operator*(R a, Cx<R> b) { return {a * b.x, a * b.y}; }
template <class R> __host__ __device__ inline Cx<R> operator*(Cx<R> a, R b) { return {a.x * b, a.y * b}; }
template <class R> __host__ __device__ inline Cx<R>& operator+=(Cx<R>& a, Cx<R> b) { return a = a + b; }
template <class R> __host__ __device__ inline Cx<R>& operator-=(Cx<R>& a, Cx<R> b) { return a = a - b; }

// a + b·c and a + conj(b)·c, written so the compiler emits fused multiply-adds.
template <class R> __host__ __device__ inline R fma_(R a, R b, R c) { return fma(b, c, a); }
template <class R> __host__ __device__ inline Cx<R> fma_(Cx<R> a, Cx<R> b, Cx<R> c) {
  return {fma(b.x, c.x, fma(-b.y, c.y, a.x)), fma(b.x, c.y, fma(b.y, c.x, a.y))};
}
template <class R> __host__ __device__ inline R fma_conj(R a, R b, R c) { return fma(b, c, a); }
template <class R> __host__ __device__ inline Cx<R> fma_conj(Cx<R> a, Cx<R> b, Cx<R> c) {
  return {fma(b.x, c.x, fma(b.y, c.y, a.x)), fma(b.x, c.y, fma(-b.y, c.x, a.y))};
}

template <class T> __host__ __device__ inline T from_real(sreal_t<T> r) {
  if constexpr (is_cx<T>) return T{r, sreal_t<T>(0)};
  else return r;
}

template <class T> __host__ __device__ inline bool is_finite(T v) {
  if constexpr (is_cx<T>) return isfinite(v.x) && isfinite(v.y);
  else return isfinite(v);
}

// Group and warp sums (covflow/linalg/cuda/warp.cuh) for real scalars, and their complex twins.
using cuda::group_mask;
using cuda::group_sum;
using cuda::warp_sum;
template <int kWidth, class R> __device__ inline Cx<R> group_sum(Cx<R> v) {
  return {group_sum<kWidth>(v.x), group_sum<kWidth>(v.y)};
}
template <class R> __device__ inline Cx<R> warp_sum(Cx<R> v) { return group_sum<32>(v); }

}  // namespace covflow::linalg::detail
