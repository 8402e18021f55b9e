// h2_from_dense_device: the construction of h2_from_dense (h2.hpp; h2_dense.cpp on the CPU) on the
// CUDA backend, batched per level (Boukaram, Turkiyyah & Keyes, ACM TOMS 45(1) 2019, the batched
// level-by-level pattern of the compression; the truncation of Börm, EMS 2010, as on the CPU).
// The trees, block trees and every node's F*_t are built on the host (h2_tree.cpp, far_columns);
// the matrix stays in the caller's order on the device and is read through the permutation.
// Per level, bottom-up:
//   1. gather_leaf_kernel (leaves) or project_kernel (inner nodes) writes each node's M_tᴴ into a
//      zero-padded strided batch of F × w matrices (F = the level's largest |F*_t|; w = m at the
//      leaves, 2·k_{l+1} above, child c's projection U_cᴴ·A(c, F*_t) in columns [c·k_{l+1},
//      (c+1)·k_{l+1}) so that the stacked transfers come out in H2<T>'s k_child × k_parent layout);
//   2. linalg::geqrf (tall QR) → R (min(F, w) × w); rh_kernel forms Rᴴ;
//   3. linalg::gesvj on Rᴴ → its left singular vectors, M_t's, and σ;
//   4. rank_kernel: each node's truncation rank and dropped Σσ²; the ranks and drops are read back
//      to the host — the level rank sizes every later launch. Construction synchronises the stream
//      a few times per level (the read-back, and before per-level temporaries are freed):
//      acceptable for a construction, which is not a frame-loop operation;
//   5. basis_kernel (leaves: the leaf bases and the expanded n × k_L basis in tree order) or
//      transfer_kernel + expand_kernel (inner: E_c from the vectors, rows past the child's rank
//      zero, then the expanded basis U_t = [U_c1·E_c1; U_c2·E_c2]);
//   6. couplings S_ts = U_tᴴ·A(t, s)·U_s by two kernels (A(t, s)·U_s, then U_tᴴ·that).
// Dense blocks by dense_kernel; the result is allocated from the host skeleton at the end and the
// per-level arrays copied in. Simple one-thread-per-output kernels (h2_cuda_dense_kernels.cuh,
// shared with H2DensePlan, which runs them over a batch of matrices without reading anything
// back): O(n²·k) work per level, as the CPU path. Temporaries are cudaMalloc'ed (a construction, not for the frame loop); the call
// synchronises the stream before it returns.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "../common/checks.hpp"
#include "../common/device_scalar.cuh"
#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#include "covflow/linalg/qr.hpp"
#include "covflow/linalg/svd.hpp"
#include "h2_cuda.cuh"
#include "h2_cuda_dense_kernels.cuh"
#include "h2_impl.hpp"

namespace covflow::linalg::detail::h2_cuda {
namespace {

using std::int64_t;
using cuda::DeviceBuffer;
using namespace dense;

template <class T>
using dev_t = device_t<T>;

// A level's node arrays on the device.
struct LevelBuffers {
  DeviceBuffer<int> begin, size, far_ptr, far_cols, node_of;
  int f_max = 0;
  int cap = 0;  // the most points a node of the level holds
  LevelNodes view() const { return {begin.data(), size.data(), far_ptr.data(), far_cols.data()}; }
};

LevelBuffers level_buffers(const H2Tree& tree, int l, const std::vector<std::vector<int>>& far, cudaStream_t stream) {
  LevelBuffers out;
  const auto count = static_cast<std::size_t>(tree.nodes(l));
  std::vector<int> begin(count), size(count), ptr(count + 1, 0), cols, node_of(static_cast<std::size_t>(tree.n));
  for (std::size_t t = 0; t < count; ++t) {
    begin[t] = tree.begin(l, static_cast<int64_t>(t));
    size[t] = tree.size(l, static_cast<int64_t>(t));
    out.cap = std::max(out.cap, size[t]);
    for (int i = 0; i < size[t]; ++i) node_of[static_cast<std::size_t>(begin[t] + i)] = static_cast<int>(t);
    for (int c : far[t]) cols.push_back(tree.permutation[static_cast<std::size_t>(c)]);
    ptr[t + 1] = static_cast<int>(cols.size());
    out.f_max = std::max(out.f_max, static_cast<int>(far[t].size()));
  }
  if (cols.empty()) cols.push_back(0);
  out.begin = DeviceBuffer<int>(count);
  out.size = DeviceBuffer<int>(count);
  out.far_ptr = DeviceBuffer<int>(count + 1);
  out.far_cols = DeviceBuffer<int>(cols.size());
  out.node_of = DeviceBuffer<int>(node_of.size());
  out.begin.upload(begin, stream);
  out.size.upload(size, stream);
  out.far_ptr.upload(ptr, stream);
  out.far_cols.upload(cols, stream);
  out.node_of.upload(node_of, stream);
  // The uploads above read pageable host memory that dies here: let them finish.
  COVFLOW_CUDA_TRY(cudaStreamSynchronize(stream));
  return out;
}

}  // namespace

template <class T>
H2Device<T> from_dense(Exec& exec, Batch<const T> input, std::span<const double> points, int dim, double tol,
                       const H2Options& options, H2CompressReport* report) {
  using D = dev_t<T>;
  using R = real_t<T>;
  CudaContext& context = exec.cuda_context();
  context.make_current();
  const cudaStream_t stream = context.stream();

  H2<T> skeleton;
  skeleton.tree = h2::build_tree(points, dim, options.leaf_size);
  const H2Tree& tree = skeleton.tree;
  h2::build_block_tree(tree, options.eta, skeleton.couplings, skeleton.dense_pairs);
  const int depth = tree.depth;
  const int64_t n = tree.n, m = tree.leaf_capacity;
  const D* a = dev(input.data);
  const long long lda = input.ld;
  int64_t nodes_with_far = 0;
  const auto far = h2::far_columns(tree, skeleton.couplings, nodes_with_far);

  DeviceBuffer<int> perm(static_cast<std::size_t>(n));
  perm.upload(tree.permutation, stream);
  DeviceBuffer<double> norm_acc(1);
  norm_acc.fill_bytes(0, stream);
  norm2_kernel<D><<<blocks_for(n * n), kThreads, 0, stream>>>(a, lda, n, norm_acc.data());
  COVFLOW_CHECK_LAUNCH();
  double norm2_total = 0;
  norm_acc.download({&norm2_total, 1}, stream);
  COVFLOW_CUDA_TRY(cudaStreamSynchronize(stream));
  if (!std::isfinite(norm2_total))
    throw InvalidArgument("h2_from_dense_device: a: holds a non-finite entry (or ‖a‖_F² overflows double)");
  const double tau2 = nodes_with_far > 0 ? tol * tol * norm2_total / (2.0 * static_cast<double>(nodes_with_far)) : 0.0;

  skeleton.rank.assign(static_cast<std::size_t>(depth) + 1, 0);
  std::vector<DeviceBuffer<D>> transfers(static_cast<std::size_t>(depth) + 1), couplings(static_cast<std::size_t>(depth) + 1);
  DeviceBuffer<D> leaf_basis;
  DeviceBuffer<D> child_basis;  // level l + 1's expanded basis (n × k_{l+1}, tree order)
  DeviceBuffer<int> child_rank;
  LevelBuffers child_level;
  double dropped_total = 0;
  for (int l = depth; l >= 0; --l) {
    LevelBuffers level = level_buffers(tree, l, far[static_cast<std::size_t>(l)], stream);
    const int64_t count = tree.nodes(l);
    const int kc = l == depth ? 0 : skeleton.rank[static_cast<std::size_t>(l) + 1];
    const int w = l == depth ? static_cast<int>(m) : 2 * kc;
    const int f = level.f_max, q = std::min(f, w);
    DeviceBuffer<int> rank(static_cast<std::size_t>(count));
    DeviceBuffer<double> dropped(static_cast<std::size_t>(count));
    DeviceBuffer<D> vectors;  // gesvj's U: count × (w × q)
    rank.fill_bytes(0, stream);
    dropped.fill_bytes(0, stream);
    if (q > 0) {
      DeviceBuffer<D> mh(static_cast<std::size_t>(count * f * w));
      if (l == depth)
        gather_leaf_kernel<D><<<blocks_for(count * f * w), kThreads, 0, stream>>>(level.view(), perm.data(), a, lda, 0,
                                                                                 nullptr, count, f, w, mh.data());
      else
        project_kernel<D><<<blocks_for(count * f * w), kThreads, 0, stream>>>(level.view(), child_level.view(), perm.data(), a,
                                                                             lda, 0, nullptr, count, f, kc, child_basis.data(),
                                                                             n, mh.data());
      COVFLOW_CHECK_LAUNCH();
      DeviceBuffer<D> tau(static_cast<std::size_t>(count * q));
      DeviceBuffer<int> qr_info(static_cast<std::size_t>(count));
      geqrf<T>(exec, Batch<T>{reinterpret_cast<T*>(mh.data()), f, w, f, static_cast<int64_t>(f) * w, count},
               {reinterpret_cast<T*>(tau.data()), static_cast<std::size_t>(count * q)},
               {qr_info.data(), static_cast<std::size_t>(count)});
      DeviceBuffer<D> rh(static_cast<std::size_t>(count * w * q));
      rh_kernel<D><<<blocks_for(count * w * q), kThreads, 0, stream>>>(mh.data(), count, f, w, q, rh.data());
      COVFLOW_CHECK_LAUNCH();
      DeviceBuffer<R> sigma(static_cast<std::size_t>(count * q));
      DeviceBuffer<SvdInfo> svd_info(static_cast<std::size_t>(count));
      vectors = DeviceBuffer<D>(static_cast<std::size_t>(count * w * q));
      gesvj<T>(exec, Batch<T>{reinterpret_cast<T*>(rh.data()), w, q, w, static_cast<int64_t>(w) * q, count},
               {sigma.data(), static_cast<std::size_t>(count * q)},
               Batch<T>{reinterpret_cast<T*>(vectors.data()), w, q, w, static_cast<int64_t>(w) * q, count}, Batch<T>{},
               {svd_info.data(), static_cast<std::size_t>(count)}, SvdOptions{.u = true, .v = false});
      rank_kernel<R><<<blocks_for(count), kThreads, 0, stream>>>(level.view(), count, sigma.data(), q, norm_acc.data(), tol,
                                                                 static_cast<double>(nodes_with_far), rank.data(),
                                                                 dropped.data());
      COVFLOW_CHECK_LAUNCH();
      COVFLOW_CUDA_TRY(cudaStreamSynchronize(stream));  // before this block's temporaries are freed
    }
    // The one read-back of the level: its ranks (and drops, for the report).
    std::vector<int> host_rank(static_cast<std::size_t>(count));
    std::vector<double> host_dropped(static_cast<std::size_t>(count));
    rank.download(host_rank, stream);
    dropped.download(host_dropped, stream);
    COVFLOW_CUDA_TRY(cudaStreamSynchronize(stream));
    int k = 0;
    for (std::size_t t = 0; t < host_rank.size(); ++t) {
      k = std::max(k, host_rank[t]);
      dropped_total += host_dropped[t];
    }
    skeleton.rank[static_cast<std::size_t>(l)] = k;

    DeviceBuffer<D> basis(static_cast<std::size_t>(n * k));
    if (l == depth) {
      leaf_basis = DeviceBuffer<D>(static_cast<std::size_t>(count * m * k));
      if (k > 0) {
        basis_kernel<D><<<blocks_for(count * m * k), kThreads, 0, stream>>>(level.view(), count, vectors.data(),
                                                                           static_cast<int>(m), q, rank.data(), k,
                                                                           leaf_basis.data(), 0, basis.data(), n);
        COVFLOW_CHECK_LAUNCH();
      }
    } else {
      const int64_t children = tree.nodes(l + 1);
      transfers[static_cast<std::size_t>(l) + 1] = DeviceBuffer<D>(static_cast<std::size_t>(children * kc * k));
      if (kc > 0 && k > 0) {
        transfer_kernel<D><<<blocks_for(children * kc * k), kThreads, 0, stream>>>(
            children, vectors.data(), kc, q, rank.data(), child_rank.data(), k, transfers[static_cast<std::size_t>(l) + 1].data(),
            0);
        COVFLOW_CHECK_LAUNCH();
        expand_kernel<D><<<blocks_for(n * k), kThreads, 0, stream>>>(n, child_level.node_of.data(), child_basis.data(), kc,
                                                                    transfers[static_cast<std::size_t>(l) + 1].data(), 0, k,
                                                                    basis.data());
        COVFLOW_CHECK_LAUNCH();
      }
    }

    // Couplings of this level.
    const int first = skeleton.couplings.level_ptr[static_cast<std::size_t>(l)];
    const int64_t pairs = skeleton.couplings.count(l);
    couplings[static_cast<std::size_t>(l)] = DeviceBuffer<D>(static_cast<std::size_t>(pairs * k * k));
    if (pairs > 0 && k > 0) {
      DeviceBuffer<int> rows(static_cast<std::size_t>(pairs)), cols(static_cast<std::size_t>(pairs));
      rows.upload({skeleton.couplings.row.data() + first, static_cast<std::size_t>(pairs)}, stream);
      cols.upload({skeleton.couplings.col.data() + first, static_cast<std::size_t>(pairs)}, stream);
      DeviceBuffer<D> tmp(static_cast<std::size_t>(pairs * level.cap * k));
      coupling_right_kernel<D><<<blocks_for(pairs * level.cap * k), kThreads, 0, stream>>>(
          level.view(), rows.data(), cols.data(), pairs, level.cap, perm.data(), a, lda, 0, nullptr, basis.data(), n, k,
          tmp.data());
      COVFLOW_CHECK_LAUNCH();
      coupling_left_kernel<D><<<blocks_for(pairs * k * k), kThreads, 0, stream>>>(
          level.view(), rows.data(), pairs, level.cap, basis.data(), n, k, tmp.data(), couplings[static_cast<std::size_t>(l)].data(),
          0);
      COVFLOW_CHECK_LAUNCH();
      COVFLOW_CUDA_TRY(cudaStreamSynchronize(stream));  // before rows, cols and tmp are freed
    }
    COVFLOW_CUDA_TRY(cudaStreamSynchronize(stream));  // the child level's buffers are freed by the moves
    child_basis = std::move(basis);
    child_rank = std::move(rank);
    child_level = std::move(level);
  }

  // The skeleton's offsets, the allocation, and the per-level arrays copied in.
  auto k = [&](int l) { return static_cast<int64_t>(skeleton.rank[static_cast<std::size_t>(l)]); };
  skeleton.transfer_offset.assign(static_cast<std::size_t>(depth) + 2, 0);
  skeleton.coupling_offset.assign(static_cast<std::size_t>(depth) + 2, 0);
  for (int l = 0; l <= depth; ++l) {
    const auto i = static_cast<std::size_t>(l);
    skeleton.transfer_offset[i + 1] = skeleton.transfer_offset[i] + (l == 0 ? 0 : tree.nodes(l) * k(l) * k(l - 1));
    skeleton.coupling_offset[i + 1] = skeleton.coupling_offset[i] + skeleton.couplings.count(l) * k(l) * k(l);
  }
  skeleton.orthogonal = true;
  H2Device<T> out = allocate(exec, skeleton);
  const H2DeviceArrays<T>& d = out.arrays();
  auto copy = [&](const T* target, const DeviceBuffer<D>& from, std::int64_t offset) {
    if (from.size() > 0)
      COVFLOW_CUDA_TRY(cudaMemcpyAsync(writable(target) + offset, from.data(), from.bytes(), cudaMemcpyDeviceToDevice, stream));
  };
  copy(d.leaf_basis, leaf_basis, 0);
  for (int l = 1; l <= depth; ++l) copy(d.transfer, transfers[static_cast<std::size_t>(l)], skeleton.transfer_offset[static_cast<std::size_t>(l)]);
  for (int l = 0; l <= depth; ++l) copy(d.coupling, couplings[static_cast<std::size_t>(l)], skeleton.coupling_offset[static_cast<std::size_t>(l)]);
  const int64_t dense_pairs = skeleton.dense_pairs.count();
  if (dense_pairs > 0) {
    LevelBuffers leaves = level_buffers(tree, depth, far[static_cast<std::size_t>(depth)], stream);
    dense_kernel<D><<<blocks_for(dense_pairs * m * m), kThreads, 0, stream>>>(
        leaves.view(), d.dense_pairs.row, d.dense_pairs.col, dense_pairs, static_cast<int>(m), perm.data(), a, lda, 0, nullptr,
        dev(writable(d.dense)), 0);
    COVFLOW_CHECK_LAUNCH();
    COVFLOW_CUDA_TRY(cudaStreamSynchronize(stream));
  }
  COVFLOW_CUDA_TRY(cudaStreamSynchronize(stream));  // the skeleton and every temporary die here

  if (report != nullptr) {
    *report = H2CompressReport{};
    report->tolerance = tol;
    report->norm = std::sqrt(norm2_total);
    report->node_threshold = std::sqrt(tau2);
    report->error_bound = norm2_total > 0 ? std::sqrt(2 * dropped_total / norm2_total) : 0.0;
    report->ranks_after = skeleton.rank;
    // h2_bytes's formula (the skeleton holds no values for h2_stats to check).
    std::size_t bytes = static_cast<std::size_t>(dense_pairs * m * m + tree.nodes(depth) * m * k(depth));
    for (int l = 0; l <= depth; ++l)
      bytes += static_cast<std::size_t>(skeleton.couplings.count(l) * k(l) * k(l) + (l == 0 ? 0 : tree.nodes(l) * k(l) * k(l - 1)));
    report->bytes_after = bytes * sizeof(T);
  }
  return out;
}

#define COVFLOW_H2_CUDA_DENSE(T)                                                                                \
  template H2Device<T> from_dense<T>(Exec&, Batch<const T>, std::span<const double>, int, double, const H2Options&, \
                                     H2CompressReport*);
COVFLOW_H2_CUDA_DENSE(f32)
COVFLOW_H2_CUDA_DENSE(f64)
COVFLOW_H2_CUDA_DENSE(cf32)
COVFLOW_H2_CUDA_DENSE(cf64)
#undef COVFLOW_H2_CUDA_DENSE

}  // namespace covflow::linalg::detail::h2_cuda
