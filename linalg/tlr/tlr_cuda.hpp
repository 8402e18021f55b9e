// Internal: the CUDA backend's TLR entry points (tlr_cuda*.cu). tlr.cpp checks the arguments and
// the workspace size and calls these on a CUDA Exec; they trust what was checked.
#pragma once

#include <cstddef>
#include <span>

#include "covflow/linalg/tlr.hpp"

namespace covflow::linalg::detail::tlr_cuda {

template <class T>
std::size_t compress_workspace(const Exec& exec, const TlrShape& shape);
template <class T>
void compress(Exec& exec, Batch<const T> a, Tlr<T> out, std::span<TlrInfo> info, std::span<std::byte> workspace,
              const TlrOptions& options);

template <class T>
void expand(Exec& exec, Tlr<const T> a, Batch<T> out);

template <class T>
std::size_t gemv_workspace(const Exec& exec, const TlrShape& shape, std::int64_t nrhs);
template <class T>
void gemv(Exec& exec, Op op, T alpha, Tlr<const T> a, Batch<const T> x, T beta, Batch<T> y, std::span<std::byte> workspace);

template <class T>
std::size_t gemm_lld_workspace(const Exec& exec, const TlrShape& a, const TlrShape& b);
template <class T>
void gemm_lld(Exec& exec, Op op_a, Op op_b, T alpha, Tlr<const T> a, Tlr<const T> b, T beta, Batch<T> c,
              std::span<std::byte> workspace);

template <class T>
std::size_t gemm_lll_workspace(const Exec& exec, const TlrShape& a, const TlrShape& b, const TlrShape& c);
template <class T>
void gemm_lll(Exec& exec, Op op_a, Op op_b, T alpha, Tlr<const T> a, Tlr<const T> b, T beta, Tlr<T> c,
              std::span<TlrInfo> info, std::span<std::byte> workspace, const TlrOptions& options);

template <class T>
std::size_t potrf_workspace(const Exec& exec, const TlrShape& shape);
template <class T>
void potrf(Exec& exec, Tlr<T> a, std::span<TlrInfo> info, std::span<std::byte> workspace, const TlrOptions& options);

template <class T>
std::size_t potrs_workspace(const Exec& exec, const TlrShape& shape, std::int64_t nrhs);
template <class T>
void potrs(Exec& exec, Tlr<const T> l, Batch<T> b, std::span<const TlrInfo> info, std::span<std::byte> workspace);

}  // namespace covflow::linalg::detail::tlr_cuda
