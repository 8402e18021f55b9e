// `covflow linalg heev`, `cholupdate`, `qr`, `svd` and `rsvd` on NumPy files, and the CLI11 wiring of
// every `covflow linalg` command (lu, cholesky and solve run in solve_cli.cpp).
//
// Every matrix is copied from the file into a packed column-major batch and back
// (linalg_cli_support.hpp), so the matrix linalg sees is the matrix numpy indexes: numpy's UPLO is
// linalg's uplo unchanged, and column k of the eigenvector matrix is V[..., :, k]. (Read in place,
// the C-order bytes would be each matrix's transpose — for a Hermitian matrix its conjugate — with
// the triangles swapped and conjugated eigenvectors.) qr, svd and rsvd copy the same way; their
// outputs go back to C order, and Vh = Vᴴ needs no reordering at all: V's column-major elements,
// conjugated, are Vh's in C order.
#include "common/linalg_cli.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <complex>
#include <filesystem>
#include <limits>
#include <optional>
#include <ostream>
#include <span>
#include <sstream>
#include <utility>
#include <vector>

#include "common/exit_codes.hpp"
#include "common/linalg_cli_support.hpp"
#include "covflow/io/npy.hpp"
#include "covflow/linalg/device.hpp"
#include "covflow/linalg/cholupdate.hpp"
#include "covflow/linalg/error.hpp"
#include "covflow/linalg/exec.hpp"
#include "covflow/linalg/heev.hpp"
#include "covflow/linalg/qr.hpp"
#include "covflow/linalg/rsvd.hpp"
#include "covflow/linalg/svd.hpp"
#include "covflow/linalg/types.hpp"
#if COVFLOW_HAS_CUDA
#include "covflow/linalg/cuda/check.hpp"
#include "covflow/linalg/cuda/context.hpp"
#include "covflow/linalg/cuda/memory.hpp"
#endif

namespace covflow::cli {

using namespace detail;

namespace {

std::string info_reason(int info, char uplo) {
  if (info == la::status::non_finite_input)
    return std::string("NaN or Inf in the ") + (uplo == 'U' ? "upper" : "lower") + " triangle";
  if (info == la::status::no_convergence) return "no convergence";
  if (info == kUnwritten) return "not computed (info never written)";
  return "info " + std::to_string(info);
}

template <class T>
int heev_typed(const HeevRequest& request, const io::NpyArray& input, const Stack& s, std::ostream& out,
               std::ostream& err) {
  using R = la::real_t<T>;
  const std::string command = "covflow linalg heev";
  const auto n = static_cast<std::int64_t>(s.rows);
  // 0×0 matrices have nothing to compute: none goes to linalg, so none needs an info entry (a
  // batch of them may be 2^31 − 1 long), and each succeeded.
  const auto count = n == 0 ? std::int64_t(0) : static_cast<std::int64_t>(s.count);
  const bool want_vectors = !request.vectors.empty();
  const la::HeevOptions options{request.uplo == 'U' ? la::Uplo::upper : la::Uplo::lower, want_vectors};

  std::vector<T> a = to_column_major<T>(input, s);
  std::vector<R> w(static_cast<std::size_t>(count * n), std::numeric_limits<R>::quiet_NaN());
  std::vector<int> info(static_cast<std::size_t>(count), kUnwritten);

  const la::Backend backend = on_backend(request.device, command, err, [&](la::Exec& exec) {
#if COVFLOW_HAS_CUDA
    if (exec.is_cuda()) {
      la::CudaContext& context = exec.cuda_context();
      context.make_current();
      const cudaStream_t stream = context.stream();
      la::cuda::DeviceBuffer<T> device_a(a.size());
      la::cuda::DeviceBuffer<R> device_w(w.size());
      la::cuda::DeviceBuffer<int> device_info(info.size());
      device_a.upload(a, stream);
      device_w.fill_bytes(0xff, stream);     // NaN: an unwritten eigenvalue shows
      device_info.fill_bytes(0x7f, stream);  // kUnwritten
      la::heev<T>(exec, la::Batch<T>::packed(device_a.data(), n, n, count), {device_w.data(), device_w.size()},
                  {device_info.data(), device_info.size()}, options);
      device_a.download(a, stream);
      device_w.download(w, stream);
      device_info.download(info, stream);
      exec.synchronize();
      return;
    }
#endif
    la::heev<T>(exec, la::Batch<T>::packed(a.data(), n, n, count), w, info, options);
  });

  // Matrices whose info is not 0: NaN out, named on stderr, the rest written as computed.
  std::vector<std::pair<std::string, std::vector<std::uint64_t>>> failures;  // reason → indices
  std::uint64_t failed = 0;
  for (std::int64_t b = 0; b < count; ++b) {
    if (info[b] == 0) continue;
    ++failed;
    const std::string reason = info_reason(info[b], request.uplo);
    auto it = std::find_if(failures.begin(), failures.end(), [&](const auto& f) { return f.first == reason; });
    if (it == failures.end()) it = failures.insert(failures.end(), {reason, {}});
    it->second.push_back(static_cast<std::uint64_t>(b));
    std::fill_n(w.begin() + b * n, n, std::numeric_limits<R>::quiet_NaN());
    if (want_vectors) std::fill_n(a.begin() + b * n * n, n * n, T(std::numeric_limits<R>::quiet_NaN()));
  }

  io::NpyArray values;
  values.dtype = io::real_dtype(input.dtype);
  values.shape = s.batched ? std::vector<std::uint64_t>{s.count, s.rows} : std::vector<std::uint64_t>{s.rows};
  values.bytes = raw_bytes(w);
  store(request.values, values);
  io::NpyArray vectors;
  if (want_vectors) {
    vectors.dtype = input.dtype;
    vectors.shape = input.shape;
    vectors.bytes = column_major_to_c_order(a, s);
    store(request.vectors, vectors);
  }

  out << "heev: " << (s.batched ? std::to_string(s.count) + " matrices " : std::string("one matrix ")) << s.rows << "×"
      << s.rows << " " << io::numpy_name(input.dtype) << " on " << device_name(backend) << ", uplo " << request.uplo
      << ": wrote " << request.values.string() << " " << describe(values);
  if (want_vectors) out << " and " << request.vectors.string() << " " << describe(vectors);
  out << "\n";

  if (failed == 0) return exit_code::ok;
  err << command << ": " << request.input.string() << ": ";
  if (s.batched) {
    err << failed << " of " << s.count << (s.count == 1 ? " matrix" : " matrices") << " failed, written as NaN in "
        << request.values.string() << (want_vectors ? " and " + request.vectors.string() : std::string()) << ":";
    const char* separator = " ";
    for (const auto& [reason, indices] : failures) {
      err << separator << (indices.size() == 1 ? "matrix " : "matrices ") << index_list(indices) << " (" << reason << ")";
      separator = "; ";
    }
  } else {
    err << "the matrix failed (" << failures.front().first << "), written as NaN in " << request.values.string()
        << (want_vectors ? " and " + request.vectors.string() : std::string());
  }
  err << "\n";
  return exit_code::numerical;
}

std::string chol_reason(int info) {
  if (info == la::status::non_finite_input) return "NaN or Inf in the factor's lower triangle or in V";
  if (info == kUnwritten) return "not computed (info never written)";
  if (info > 0)
    return "not positive definite at column " + std::to_string(info - 1) + ", counted from 0";
  return "info " + std::to_string(info);
}

template <class T>
int cholupdate_typed(const CholupdateRequest& request, const io::NpyArray& factor, const io::NpyArray& update_file,
                     const Stack& ls, const Stack& vs, std::ostream& out, std::ostream& err) {
  using R = la::real_t<T>;
  const std::string command = "covflow linalg cholupdate";
  const auto n = static_cast<std::int64_t>(ls.rows);
  const auto k = static_cast<std::int64_t>(vs.cols);
  // 0×0 factors hold no data and are not handed to linalg (see heev_typed); with n > 0 the
  // factors' data bounds the count.
  const auto count = n == 0 ? std::int64_t(0) : static_cast<std::int64_t>(ls.count);
  const la::Sign sign = request.sign == '-' ? la::Sign::downdate : la::Sign::update;

  std::vector<T> l = to_column_major<T>(factor, ls);
  const std::vector<T> v = to_column_major<T>(update_file, vs);
  // Nothing to compute (k = 0) leaves info at 0: success.
  std::vector<int> info(static_cast<std::size_t>(count), k == 0 ? 0 : kUnwritten);

  // The CUDA path takes k ≤ kCudaMaxRank per call: auto runs a larger V on the CPU, --device cuda
  // refuses it.
  DeviceChoice device = request.device;
  if (k > la::kCudaMaxRank && device != DeviceChoice::cpu) {
    if (device == DeviceChoice::cuda)
      fail(exit_code::device_unavailable, "--device cuda: the CUDA path takes at most " +
                                              std::to_string(la::kCudaMaxRank) + " columns of V, " +
                                              request.update.string() + " has " + std::to_string(k));
    if (la::cuda_compiled())
      err << command << ": note: --device auto: k = " << k << " > " << la::kCudaMaxRank << "; running on the CPU\n";
    device = DeviceChoice::cpu;
  }
  const la::Backend backend = on_backend(device, command, err, [&](la::Exec& exec) {
#if COVFLOW_HAS_CUDA
    if (exec.is_cuda()) {
      la::CudaContext& context = exec.cuda_context();
      context.make_current();
      const cudaStream_t stream = context.stream();
      la::cuda::DeviceBuffer<T> device_l(l.size()), device_v(v.size());
      la::cuda::DeviceBuffer<int> device_info(info.size());
      device_l.upload(l, stream);
      device_v.upload(v, stream);
      device_info.fill_bytes(0x7f, stream);  // kUnwritten
      la::cholupdate<T>(exec, la::Batch<T>::packed(device_l.data(), n, n, count),
                        la::Batch<const T>::packed(device_v.data(), n, k, count), sign,
                        {device_info.data(), device_info.size()});
      device_l.download(l, stream);
      device_info.download(info, stream);
      exec.synchronize();
      return;
    }
#endif
    la::cholupdate<T>(exec, la::Batch<T>::packed(l.data(), n, n, count), la::Batch<const T>::packed(v.data(), n, k, count),
                      sign, info);
  });

  // Matrices whose info is not 0 are written as NaN (linalg left them as they were; a NaN factor
  // cannot be mistaken for an updated one) and named on stderr.
  std::vector<std::pair<std::string, std::vector<std::uint64_t>>> failures;
  std::uint64_t failed = 0;
  for (std::int64_t b = 0; b < count; ++b) {
    if (info[b] == 0) continue;
    ++failed;
    const std::string reason = chol_reason(info[b]);
    auto it = std::find_if(failures.begin(), failures.end(), [&](const auto& f) { return f.first == reason; });
    if (it == failures.end()) it = failures.insert(failures.end(), {reason, {}});
    it->second.push_back(static_cast<std::uint64_t>(b));
    std::fill_n(l.begin() + b * n * n, n * n, T(std::numeric_limits<R>::quiet_NaN()));
  }

  io::NpyArray result;
  result.dtype = factor.dtype;
  result.shape = factor.shape;
  result.bytes = column_major_to_c_order(l, ls);
  store(request.output, result);
  out << "cholupdate: " << (ls.batched ? std::to_string(ls.count) + " factors " : std::string("one factor ")) << n
      << "×" << n << " " << io::numpy_name(factor.dtype) << ", rank " << k << " "
      << (sign == la::Sign::update ? "update" : "downdate") << " on " << device_name(backend) << ": wrote "
      << request.output.string() << " " << describe(result) << "\n";

  if (failed == 0) return exit_code::ok;
  err << command << ": " << request.factor.string() << ": ";
  if (ls.batched) {
    err << failed << " of " << ls.count << (ls.count == 1 ? " factor" : " factors") << " failed, written as NaN in "
        << request.output.string() << ":";
    const char* separator = " ";
    for (const auto& [reason, indices] : failures) {
      err << separator << (indices.size() == 1 ? "matrix " : "matrices ") << index_list(indices) << " (" << reason << ")";
      separator = "; ";
    }
  } else {
    err << "the factor failed (" << failures.front().first << "), written as NaN in " << request.output.string();
  }
  err << "\n";
  return exit_code::numerical;
}

// ---- qr and svd --------------------------------------------------------------------------------

template <class T>
int qr_typed(const QrRequest& request, const io::NpyArray& input, const Stack& s, std::ostream& out,
             std::ostream& err) {
  const std::string command = "covflow linalg qr";
  const auto m = static_cast<std::int64_t>(s.rows), n = static_cast<std::int64_t>(s.cols);
  const std::int64_t k = std::min(m, n);
  // Matrices with no element (k = 0) have nothing to factor: none goes to linalg (a batch of them
  // may be 2^31 − 1 long); their Q and R hold no element either.
  const auto count = k == 0 ? std::int64_t(0) : static_cast<std::int64_t>(s.count);
  const bool want_q = !request.q.empty();
  const std::size_t a_elements = static_cast<std::size_t>(m * n), q_elements = static_cast<std::size_t>(m * k);

  std::vector<T> a = to_column_major<T>(input, s);
  std::vector<T> tau(static_cast<std::size_t>(count * k), nan_of<T>());
  std::vector<T> q(want_q ? static_cast<std::size_t>(count) * q_elements : 0, nan_of<T>());
  std::vector<int> info(static_cast<std::size_t>(count), kUnwritten);

  const la::Backend backend = on_backend(request.device, command, err, [&](la::Exec& exec) {
    if (count == 0) return;
#if COVFLOW_HAS_CUDA
    if (exec.is_cuda()) {
      la::CudaContext& context = exec.cuda_context();
      context.make_current();
      const cudaStream_t stream = context.stream();
      la::cuda::DeviceBuffer<T> device_a(a.size()), device_tau(tau.size()), device_q(q.size());
      la::cuda::DeviceBuffer<int> device_info(info.size());
      device_a.upload(a, stream);
      device_tau.fill_bytes(0xff, stream);
      device_info.fill_bytes(0x7f, stream);  // kUnwritten
      la::geqrf<T>(exec, la::Batch<T>::packed(device_a.data(), m, n, count), {device_tau.data(), device_tau.size()},
                   {device_info.data(), device_info.size()});
      if (want_q) {
        // The reflectors of Q's k columns are the first k columns of each factored matrix: its
        // first m·k elements, column-major.
        if (q_elements == a_elements || count == 1)
          COVFLOW_CUDA_TRY(cudaMemcpyAsync(device_q.data(), device_a.data(), q.size() * sizeof(T),
                                           cudaMemcpyDeviceToDevice, stream));
        else
          COVFLOW_CUDA_TRY(cudaMemcpy2DAsync(device_q.data(), q_elements * sizeof(T), device_a.data(),
                                             a_elements * sizeof(T), q_elements * sizeof(T),
                                             static_cast<std::size_t>(count), cudaMemcpyDeviceToDevice, stream));
        la::ungqr<T>(exec, la::Batch<T>::packed(device_q.data(), m, k, count),
                     std::span<const T>(device_tau.data(), device_tau.size()));
        device_q.download(q, stream);
      }
      device_a.download(a, stream);
      device_info.download(info, stream);
      exec.synchronize();
      return;
    }
#endif
    la::geqrf<T>(exec, la::Batch<T>::packed(a.data(), m, n, count), tau, info);
    if (want_q) {
      for (std::int64_t b = 0; b < count; ++b)
        std::copy_n(a.begin() + b * std::int64_t(a_elements), q_elements, q.begin() + b * std::int64_t(q_elements));
      la::ungqr<T>(exec, la::Batch<T>::packed(q.data(), m, k, count), std::span<const T>(tau));
    }
  });

  // R: the upper triangle of the first k rows of each factored matrix, zeros below, in C order.
  std::vector<T> r(static_cast<std::size_t>(count * k * n), T(0));
  for (std::int64_t b = 0; b < count; ++b)
    for (std::int64_t i = 0; i < k; ++i)
      for (std::int64_t j = i; j < n; ++j) r[(b * k + i) * n + j] = a[b * m * n + i + j * m];

  FailedMatrices failures;
  for (std::int64_t b = 0; b < count; ++b) {
    if (info[b] == 0) continue;
    failures.add(static_cast<std::uint64_t>(b), status_reason(info[b]));
    std::fill_n(r.begin() + b * k * n, k * n, nan_of<T>());
    if (want_q) std::fill_n(q.begin() + b * std::int64_t(q_elements), q_elements, nan_of<T>());
  }

  std::vector<std::string> wrote, names;
  auto shape = [&](std::uint64_t rows, std::uint64_t cols) {
    return s.batched ? std::vector<std::uint64_t>{s.count, rows, cols} : std::vector<std::uint64_t>{rows, cols};
  };
  if (want_q) {
    io::NpyArray q_array{input.dtype, shape(s.rows, std::uint64_t(k)), false,
                         column_major_to_c_order(q, Stack{std::uint64_t(count), s.rows, std::uint64_t(k), s.batched})};
    store(request.q, q_array);
    wrote.push_back(request.q.string() + " " + describe(q_array));
    names.push_back(request.q.string());
  }
  if (!request.r.empty()) {
    io::NpyArray r_array{input.dtype, shape(std::uint64_t(k), s.cols), false, raw_bytes(r)};
    store(request.r, r_array);
    wrote.push_back(request.r.string() + " " + describe(r_array));
    names.push_back(request.r.string());
  }
  out << "qr: " << matrices_phrase(s) << " " << io::numpy_name(input.dtype) << " on " << device_name(backend)
      << ": wrote " << joined(wrote) << "\n";
  return failures.report(err, command, request.input, s, joined(names));
}

template <class T>
int svd_typed(const SvdRequest& request, const io::NpyArray& input, const Stack& s, std::ostream& out,
              std::ostream& err) {
  using R = la::real_t<T>;
  const std::string command = "covflow linalg svd";
  const auto m = static_cast<std::int64_t>(s.rows), n = static_cast<std::int64_t>(s.cols);
  const std::int64_t k = std::min(m, n);
  // As for qr: matrices with no element go nowhere, and their outputs hold no element.
  const auto count = k == 0 ? std::int64_t(0) : static_cast<std::int64_t>(s.count);
  const bool want_u = !request.u.empty(), want_v = !request.vh.empty();
  const la::SvdOptions options{.u = want_u, .v = want_v};

  std::vector<T> a = to_column_major<T>(input, s);
  std::vector<R> values(static_cast<std::size_t>(count * k), std::numeric_limits<R>::quiet_NaN());
  std::vector<T> u(want_u ? static_cast<std::size_t>(count * m * k) : 0, nan_of<T>());
  std::vector<T> v(want_v ? static_cast<std::size_t>(count * n * k) : 0, nan_of<T>());
  std::vector<la::SvdInfo> info(static_cast<std::size_t>(count));
  for (auto& i : info) i.status = kUnwritten;

  const la::Backend backend = on_backend(request.device, command, err, [&](la::Exec& exec) {
    if (count == 0) return;
#if COVFLOW_HAS_CUDA
    if (exec.is_cuda()) {
      la::CudaContext& context = exec.cuda_context();
      context.make_current();
      const cudaStream_t stream = context.stream();
      la::cuda::DeviceBuffer<T> device_a(a.size()), device_u(u.size()), device_v(v.size());
      la::cuda::DeviceBuffer<R> device_values(values.size());
      la::cuda::DeviceBuffer<la::SvdInfo> device_info(info.size());
      device_a.upload(a, stream);
      device_values.fill_bytes(0xff, stream);  // NaN: an unwritten singular value shows
      device_u.fill_bytes(0xff, stream);
      device_v.fill_bytes(0xff, stream);
      device_info.fill_bytes(0x7f, stream);  // status kUnwritten
      la::gesvj<T>(exec, la::Batch<T>::packed(device_a.data(), m, n, count),
                   {device_values.data(), device_values.size()},
                   want_u ? la::Batch<T>::packed(device_u.data(), m, k, count) : la::Batch<T>{},
                   want_v ? la::Batch<T>::packed(device_v.data(), n, k, count) : la::Batch<T>{},
                   {device_info.data(), device_info.size()}, options);
      device_values.download(values, stream);
      if (want_u) device_u.download(u, stream);
      if (want_v) device_v.download(v, stream);
      device_info.download(info, stream);
      exec.synchronize();
      return;
    }
#endif
    la::gesvj<T>(exec, la::Batch<T>::packed(a.data(), m, n, count), values,
                 want_u ? la::Batch<T>::packed(u.data(), m, k, count) : la::Batch<T>{},
                 want_v ? la::Batch<T>::packed(v.data(), n, k, count) : la::Batch<T>{}, info, options);
  });

  FailedMatrices failures;
  for (std::int64_t b = 0; b < count; ++b) {
    const int status = info[b].status;
    if (status == 0) continue;
    failures.add(static_cast<std::uint64_t>(b), status == la::status::no_convergence
                                                    ? "no convergence in " + std::to_string(info[b].sweeps) + " sweeps"
                                                    : status_reason(status));
    std::fill_n(values.begin() + b * k, k, std::numeric_limits<R>::quiet_NaN());
    if (want_u) std::fill_n(u.begin() + b * m * k, m * k, nan_of<T>());
    if (want_v) std::fill_n(v.begin() + b * n * k, n * k, nan_of<T>());
  }

  std::vector<std::string> wrote, names;
  io::NpyArray s_array{io::real_dtype(input.dtype),
                       s.batched ? std::vector<std::uint64_t>{s.count, std::uint64_t(k)}
                                 : std::vector<std::uint64_t>{std::uint64_t(k)},
                       false, raw_bytes(values)};
  store(request.values, s_array);
  wrote.push_back(request.values.string() + " " + describe(s_array));
  names.push_back(request.values.string());
  auto shape = [&](std::uint64_t rows, std::uint64_t cols) {
    return s.batched ? std::vector<std::uint64_t>{s.count, rows, cols} : std::vector<std::uint64_t>{rows, cols};
  };
  if (want_u) {
    io::NpyArray u_array{input.dtype, shape(s.rows, std::uint64_t(k)), false,
                         column_major_to_c_order(u, Stack{std::uint64_t(count), s.rows, std::uint64_t(k), s.batched})};
    store(request.u, u_array);
    wrote.push_back(request.u.string() + " " + describe(u_array));
    names.push_back(request.u.string());
  }
  if (want_v) {
    // Vh[b, i, j] = conj(V_b(j, i)): in C order, element (b·k + i)·n + j, which is V_b(j, i)'s own
    // column-major index.
    for (T& x : v) x = conj_of(x);
    io::NpyArray vh_array{input.dtype, shape(std::uint64_t(k), s.cols), false, raw_bytes(v)};
    store(request.vh, vh_array);
    wrote.push_back(request.vh.string() + " " + describe(vh_array));
    names.push_back(request.vh.string());
  }
  out << "svd: " << matrices_phrase(s) << " " << io::numpy_name(input.dtype) << " on " << device_name(backend)
      << ": wrote " << joined(wrote) << "\n";
  return failures.report(err, command, request.input, s, joined(names));
}

// ---- rsvd --------------------------------------------------------------------------------------

std::string rsvd_reason(std::int32_t status, bool hermitian) {
  if (status == la::rsvd_status::non_finite_input) return "NaN or Inf in the matrix";
  if (status == la::rsvd_status::svd_failed)
    return hermitian ? "the small eigenproblem did not converge" : "the small SVD did not converge";
  if (status == kUnwritten) return "not computed (info never written)";
  return "status " + std::to_string(status);
}

// linalg refuses with InvalidArgument the options that do not fit this input (a tolerance below
// what the precision can confirm): the command line chose them, so it is a usage error, in
// linalg's words after the input they do not fit.
template <class Body>
auto options_checked(const RsvdRequest& request, const io::NpyArray& input, Body&& body) {
  try {
    return body();
  } catch (const la::InvalidArgument& e) {
    fail(exit_code::usage, request.input.string() + " " + describe(input) + ": " + e.what());
  }
}

template <class T>
int rsvd_typed(const RsvdRequest& request, const io::NpyArray& input, const Stack& s, std::ostream& out,
               std::ostream& err) {
  using R = la::real_t<T>;
  const std::string command = "covflow linalg rsvd";
  const auto m = static_cast<std::int64_t>(s.rows), n = static_cast<std::int64_t>(s.cols);
  // As for svd: matrices with no element go nowhere, and their outputs hold no element.
  const auto count = std::min(m, n) == 0 ? std::int64_t(0) : static_cast<std::int64_t>(s.count);
  const bool want_u = !request.u.empty(), want_v = !request.vh.empty(), want_ranks = !request.ranks.empty();
  const la::RsvdOptions options{.rank = request.rank.value_or(0),
                                .oversampling = request.oversampling,
                                .power_iterations = request.power_iterations,
                                .tolerance = request.tolerance.value_or(0),
                                .absolute = request.absolute,
                                .block = request.block,
                                .max_rank = request.max_rank.value_or(0),
                                .hermitian = request.hermitian,
                                .seed = request.seed,
                                .u = want_u,
                                .v = want_v};
  // Columns of U and V, values per matrix in S: the fixed rank, or the largest a tolerance may take.
  const std::int64_t r =
      count == 0 ? 0 : options_checked(request, input, [&] { return la::rsvd_output_rank(m, n, options); });

  const std::vector<T> a = to_column_major<T>(input, s);
  std::vector<R> values(static_cast<std::size_t>(count * r), std::numeric_limits<R>::quiet_NaN());
  std::vector<T> u(want_u ? static_cast<std::size_t>(count * m * r) : 0, nan_of<T>());
  std::vector<T> v(want_v ? static_cast<std::size_t>(count * n * r) : 0, nan_of<T>());
  std::vector<la::RsvdInfo> info(static_cast<std::size_t>(count));
  for (auto& i : info) i.status = kUnwritten;

  const la::Backend backend = on_backend(request.device, command, err, [&](la::Exec& exec) {
    if (count == 0) return;
    options_checked(request, input, [&] {
#if COVFLOW_HAS_CUDA
      if (exec.is_cuda()) {
        la::CudaContext& context = exec.cuda_context();
        context.make_current();
        const cudaStream_t stream = context.stream();
        la::cuda::DeviceBuffer<std::byte> device_workspace(la::rsvd_workspace<T>(exec, m, n, count, options));
        la::cuda::DeviceBuffer<T> device_a(a.size()), device_u(u.size()), device_v(v.size());
        la::cuda::DeviceBuffer<R> device_values(values.size());
        la::cuda::DeviceBuffer<la::RsvdInfo> device_info(info.size());
        device_a.upload(a, stream);
        device_values.fill_bytes(0xff, stream);  // NaN: an unwritten value shows
        device_u.fill_bytes(0xff, stream);
        device_v.fill_bytes(0xff, stream);
        device_info.fill_bytes(0x7f, stream);  // status kUnwritten
        la::rsvd<T>(exec, la::Batch<const T>::packed(device_a.data(), m, n, count),
                    {device_values.data(), device_values.size()},
                    want_u ? la::Batch<T>::packed(device_u.data(), m, r, count) : la::Batch<T>{},
                    want_v ? la::Batch<T>::packed(device_v.data(), n, r, count) : la::Batch<T>{},
                    {device_info.data(), device_info.size()}, {device_workspace.data(), device_workspace.size()},
                    options);
        device_values.download(values, stream);
        if (want_u) device_u.download(u, stream);
        if (want_v) device_v.download(v, stream);
        device_info.download(info, stream);
        exec.synchronize();
        return;
      }
#endif
      std::vector<std::byte> workspace(la::rsvd_workspace<T>(exec, m, n, count, options));
      la::rsvd<T>(exec, la::Batch<const T>::packed(a.data(), m, n, count), values,
                  want_u ? la::Batch<T>::packed(u.data(), m, r, count) : la::Batch<T>{},
                  want_v ? la::Batch<T>::packed(v.data(), n, r, count) : la::Batch<T>{}, info, workspace, options);
    });
  });

  // Stopping at the largest rank before the tolerance is a result, not a failure: a note names it.
  FailedMatrices failures;
  std::vector<std::uint64_t> stopped_at_max_rank;
  std::vector<std::int32_t> ranks(want_ranks ? static_cast<std::size_t>(s.count) : 0, 0);
  std::int32_t lowest_rank = std::numeric_limits<std::int32_t>::max(), highest_rank = -1;
  for (std::int64_t b = 0; b < count; ++b) {
    const la::RsvdInfo& i = info[b];
    if (i.status == la::rsvd_status::ok || i.status == la::rsvd_status::max_rank_reached) {
      if (i.status == la::rsvd_status::max_rank_reached) stopped_at_max_rank.push_back(static_cast<std::uint64_t>(b));
      lowest_rank = std::min(lowest_rank, i.rank);
      highest_rank = std::max(highest_rank, i.rank);
      if (want_ranks) ranks[b] = i.rank;
      continue;
    }
    failures.add(static_cast<std::uint64_t>(b), rsvd_reason(i.status, request.hermitian));
    std::fill_n(values.begin() + b * r, r, std::numeric_limits<R>::quiet_NaN());
    if (want_u) std::fill_n(u.begin() + b * m * r, m * r, nan_of<T>());
    if (want_v) std::fill_n(v.begin() + b * n * r, n * r, nan_of<T>());
    if (want_ranks) ranks[b] = -1;
  }

  std::vector<std::string> wrote, names;
  io::NpyArray s_array{io::real_dtype(input.dtype),
                       s.batched ? std::vector<std::uint64_t>{s.count, std::uint64_t(r)}
                                 : std::vector<std::uint64_t>{std::uint64_t(r)},
                       false, raw_bytes(values)};
  store(request.values, s_array);
  wrote.push_back(request.values.string() + " " + describe(s_array));
  names.push_back(request.values.string());
  auto shape = [&](std::uint64_t rows, std::uint64_t cols) {
    return s.batched ? std::vector<std::uint64_t>{s.count, rows, cols} : std::vector<std::uint64_t>{rows, cols};
  };
  if (want_u) {
    io::NpyArray u_array{input.dtype, shape(s.rows, std::uint64_t(r)), false,
                         column_major_to_c_order(u, Stack{std::uint64_t(count), s.rows, std::uint64_t(r), s.batched})};
    store(request.u, u_array);
    wrote.push_back(request.u.string() + " " + describe(u_array));
    names.push_back(request.u.string());
  }
  if (want_v) {
    // As for svd: V's column-major elements, conjugated, are Vh's in C order.
    for (T& x : v) x = conj_of(x);
    io::NpyArray vh_array{input.dtype, shape(std::uint64_t(r), s.cols), false, raw_bytes(v)};
    store(request.vh, vh_array);
    wrote.push_back(request.vh.string() + " " + describe(vh_array));
    names.push_back(request.vh.string());
  }
  std::string failed_in = joined(names);
  if (want_ranks) {
    const std::vector<std::uint64_t> ranks_shape =
        s.batched ? std::vector<std::uint64_t>{s.count} : std::vector<std::uint64_t>{};
    store_int32(request.ranks, ranks_shape, ranks);
    wrote.push_back(request.ranks.string() + " " + io::format_shape(ranks_shape) + " int32");
    failed_in += " (rank -1 in " + request.ranks.string() + ")";
  }

  const std::string tolerance =
      request.tolerance ? "--tol " + number_text(*request.tolerance) + (request.absolute ? " (absolute)" : "") : "";
  out << "rsvd: " << matrices_phrase(s) << " " << io::numpy_name(input.dtype) << " on " << device_name(backend);
  if (request.hermitian) out << ", Hermitian";
  if (highest_rank >= 0) {
    if (lowest_rank == highest_rank) out << ", rank " << highest_rank;
    else out << ", ranks " << lowest_rank << "–" << highest_rank;
    if (request.tolerance) out << " at " << tolerance;
  }
  out << ": wrote " << joined(wrote) << "\n";
  if (!stopped_at_max_rank.empty()) {
    out << "rsvd: "
        << (!s.batched ? std::string("the matrix")
                       : (stopped_at_max_rank.size() == 1 ? "matrix " : "matrices ") + index_list(stopped_at_max_rank))
        << " reached "
        << (request.max_rank && *request.max_rank == r ? "--max-rank " + std::to_string(r)
                                                       : "the largest rank " + std::to_string(r))
        << " before " << tolerance << "\n";
  }
  return failures.report(err, command, request.input, s, failed_in);
}

}  // namespace

int run_heev(const HeevRequest& request, std::ostream& out, std::ostream& err) {
  return guarded("covflow linalg heev", err, [&]() -> int {
    if (request.uplo != 'L' && request.uplo != 'U')
      fail(exit_code::usage, std::string("--uplo must be L or U, got '") + request.uplo + "'");
    if (request.values.empty()) fail(exit_code::usage, "--values is required");
    if (request.values == request.vectors) fail(exit_code::usage, "--values and --vectors name the same file");
    const io::NpyArray input = load(request.input);
    const Stack s = stack_of(input, request.input, "(batch, n, n) or (n, n) Hermitian matrices");
    if (s.rows != s.cols)
      fail(exit_code::input_damaged, request.input.string() + ": matrices must be square, got shape " + describe(input) +
                                         ": " + std::to_string(s.rows) + "×" + std::to_string(s.cols));
    switch (input.dtype) {
      case io::NpyDtype::complex128: return heev_typed<la::cf64>(request, input, s, out, err);
      case io::NpyDtype::complex64: return heev_typed<la::cf32>(request, input, s, out, err);
      case io::NpyDtype::float64: return heev_typed<la::f64>(request, input, s, out, err);
      case io::NpyDtype::float32: return heev_typed<la::f32>(request, input, s, out, err);
      case io::NpyDtype::int32: break;  // load() refuses it: no linear algebra takes int32
    }
    fail(exit_code::internal_error, "unhandled dtype");
  });
}

int run_cholupdate(const CholupdateRequest& request, std::ostream& out, std::ostream& err) {
  return guarded("covflow linalg cholupdate", err, [&]() -> int {
    if (request.sign != '+' && request.sign != '-')
      fail(exit_code::usage, std::string("--sign must be + or -, got '") + request.sign + "'");
    if (request.output.empty()) fail(exit_code::usage, "--out is required");
    const io::NpyArray factor = load(request.factor);
    const io::NpyArray update = load(request.update);
    const Stack l = stack_of(factor, request.factor, "(batch, n, n) or (n, n) lower Cholesky factors");
    const Stack v = stack_of(update, request.update, "(batch, n, k) or (n, k) update vectors");
    if (l.rows != l.cols)
      fail(exit_code::input_damaged, request.factor.string() + ": Cholesky factors must be square, got shape " +
                                         describe(factor));
    if (factor.dtype != update.dtype)
      fail(exit_code::input_damaged, request.update.string() + ": dtype " + std::string(io::numpy_name(update.dtype)) +
                                         " differs from the factors' " + std::string(io::numpy_name(factor.dtype)) +
                                         " in " + request.factor.string());
    if (l.batched != v.batched || l.count != v.count || v.rows != l.rows)
      fail(exit_code::input_damaged, request.update.string() + ": shape " + describe(update) + " does not fit factors " +
                                         describe(factor) + " from " + request.factor.string() + "; expected (" +
                                         (l.batched ? std::to_string(l.count) + ", " : std::string()) +
                                         std::to_string(l.rows) + ", k)");
    switch (factor.dtype) {
      case io::NpyDtype::complex128: return cholupdate_typed<la::cf64>(request, factor, update, l, v, out, err);
      case io::NpyDtype::complex64: return cholupdate_typed<la::cf32>(request, factor, update, l, v, out, err);
      case io::NpyDtype::float64: return cholupdate_typed<la::f64>(request, factor, update, l, v, out, err);
      case io::NpyDtype::float32: return cholupdate_typed<la::f32>(request, factor, update, l, v, out, err);
      case io::NpyDtype::int32: break;  // load() refuses it: no linear algebra takes int32
    }
    fail(exit_code::internal_error, "unhandled dtype");
  });
}

int run_qr(const QrRequest& request, std::ostream& out, std::ostream& err) {
  return guarded("covflow linalg qr", err, [&]() -> int {
    if (request.q.empty() && request.r.empty()) fail(exit_code::usage, "give --q, --r or both");
    if (request.q == request.r) fail(exit_code::usage, "--q and --r name the same file");
    const io::NpyArray input = load(request.input);
    const Stack s = stack_of(input, request.input, "(batch, m, n) or (m, n) matrices");
    switch (input.dtype) {
      case io::NpyDtype::complex128: return qr_typed<la::cf64>(request, input, s, out, err);
      case io::NpyDtype::complex64: return qr_typed<la::cf32>(request, input, s, out, err);
      case io::NpyDtype::float64: return qr_typed<la::f64>(request, input, s, out, err);
      case io::NpyDtype::float32: return qr_typed<la::f32>(request, input, s, out, err);
      case io::NpyDtype::int32: break;  // load() refuses it: no linear algebra takes int32
    }
    fail(exit_code::internal_error, "unhandled dtype");
  });
}

int run_svd(const SvdRequest& request, std::ostream& out, std::ostream& err) {
  return guarded("covflow linalg svd", err, [&]() -> int {
    if (request.values.empty()) fail(exit_code::usage, "--s is required");
    if (request.values == request.u || request.values == request.vh || (!request.u.empty() && request.u == request.vh))
      fail(exit_code::usage, "--s, --u and --vh must name different files");
    const io::NpyArray input = load(request.input);
    const Stack s = stack_of(input, request.input, "(batch, m, n) or (m, n) matrices");
    switch (input.dtype) {
      case io::NpyDtype::complex128: return svd_typed<la::cf64>(request, input, s, out, err);
      case io::NpyDtype::complex64: return svd_typed<la::cf32>(request, input, s, out, err);
      case io::NpyDtype::float64: return svd_typed<la::f64>(request, input, s, out, err);
      case io::NpyDtype::float32: return svd_typed<la::f32>(request, input, s, out, err);
      case io::NpyDtype::int32: break;  // load() refuses it: no linear algebra takes int32
    }
    fail(exit_code::internal_error, "unhandled dtype");
  });
}

int run_rsvd(const RsvdRequest& request, std::ostream& out, std::ostream& err) {
  return guarded("covflow linalg rsvd", err, [&]() -> int {
    if (request.rank.has_value() == request.tolerance.has_value())
      fail(exit_code::usage, "give exactly one of --rank K (fixed rank) and --tol T (fixed accuracy)");
    if (request.max_rank && !request.tolerance)
      fail(exit_code::usage, "--max-rank goes with --tol: with --rank the rank is fixed");
    auto at_least = [](const char* option, int value, int least) {
      if (value < least)
        fail(exit_code::usage,
             std::string(option) + " must be at least " + std::to_string(least) + ", got " + std::to_string(value));
    };
    if (request.rank) at_least("--rank", *request.rank, 1);
    if (request.max_rank) at_least("--max-rank", *request.max_rank, 1);
    if (request.tolerance && !(*request.tolerance > 0 && std::isfinite(*request.tolerance)))
      fail(exit_code::usage, "--tol must be a positive number, got " + number_text(*request.tolerance));
    at_least("--oversampling", request.oversampling, 0);
    at_least("--power-iterations", request.power_iterations, 0);
    at_least("--block", request.block, 1);
    if (request.hermitian && !request.vh.empty())
      fail(exit_code::usage, "--vh does not go with --hermitian: A ≈ U·diag(S)·Uᴴ has no Vh of its own; --u writes U");
    if (request.values.empty()) fail(exit_code::usage, "--s is required");
    const std::vector<path> outputs{request.values, request.u, request.vh, request.ranks};
    for (std::size_t i = 0; i < outputs.size(); ++i)
      for (std::size_t j = i + 1; j < outputs.size(); ++j)
        if (!outputs[i].empty() && outputs[i] == outputs[j])
          fail(exit_code::usage, "--s, --u, --vh and --ranks must name different files");
    const io::NpyArray input = load(request.input);
    const Stack s = stack_of(input, request.input, "(batch, m, n) or (m, n) matrices");
    if (request.hermitian && s.rows != s.cols)
      fail(exit_code::input_damaged, request.input.string() + ": --hermitian takes square matrices, got shape " +
                                         describe(input) + ": " + std::to_string(s.rows) + "×" +
                                         std::to_string(s.cols));
    switch (input.dtype) {
      case io::NpyDtype::complex128: return rsvd_typed<la::cf64>(request, input, s, out, err);
      case io::NpyDtype::complex64: return rsvd_typed<la::cf32>(request, input, s, out, err);
      case io::NpyDtype::float64: return rsvd_typed<la::f64>(request, input, s, out, err);
      case io::NpyDtype::float32: return rsvd_typed<la::f32>(request, input, s, out, err);
      case io::NpyDtype::int32: break;  // load() refuses it: no linear algebra takes int32
    }
    fail(exit_code::internal_error, "unhandled dtype");
  });
}

// ---- CLI11 wiring ------------------------------------------------------------------------------

LinalgCommands::LinalgCommands(CLI::App& app) {
  group_ = app.add_subcommand("linalg", "Linear algebra on NumPy .npy files; results follow numpy.linalg");
  group_->require_subcommand(1);

  heev_ = group_->add_subcommand(
      "heev", "Eigenvalues (ascending) and eigenvectors of Hermitian or real symmetric matrices, as numpy.linalg.eigh");
  heev_->add_option("input", heev_input_, "IN.npy: (n, n) or (batch, n, n); complex128, complex64, float64 or float32")
      ->required();
  heev_->add_option("--values", heev_values_, "Write the eigenvalues here: (n,) or (batch, n), ascending")->required();
  heev_->add_option("--vectors", heev_vectors_, "Write the eigenvectors here, IN's shape: V[..., :, k] belongs to W[..., k]");
  heev_->add_option("--device", heev_device_, "cpu, cuda, or auto (cuda when a GPU is present)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();
  heev_->add_option("--uplo", heev_uplo_, "Triangle read, as numpy indexes the array: L (lower) or U (upper)")
      ->check(CLI::IsMember({"L", "U"}, CLI::ignore_case))
      ->capture_default_str();

  cholupdate_ = group_->add_subcommand(
      "cholupdate", "Rank-k update (+) or downdate (-) of lower Cholesky factors, as numpy.linalg.cholesky returns them");
  cholupdate_->add_option("factors", chol_factor_, "L.npy: (batch, n, n) or (n, n) lower factors, as numpy.linalg.cholesky")
      ->required();
  cholupdate_->add_option("update", chol_update_, "V.npy: (batch, n, k) or (n, k)")->required();
  cholupdate_->add_option("--sign", chol_sign_, "+ for L Lᴴ + V Vᴴ, - for L Lᴴ - V Vᴴ")
      ->required()
      ->check(CLI::IsMember({"+", "-"}));
  cholupdate_->add_option("--out", chol_output_, "Write the new factors here (L's shape)")->required();
  cholupdate_->add_option("--device", chol_device_, "cpu, cuda, or auto (cuda when a GPU is present)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();

  qr_ = group_->add_subcommand("qr", "QR factorisation A = Q R, as numpy.linalg.qr(A, mode='reduced')");
  qr_->add_option("input", qr_input_, "A.npy: (m, n) or (batch, m, n); complex128, complex64, float64 or float32")
      ->required();
  qr_->add_option("--q", qr_q_, "Write Q here: (..., m, k), k = min(m, n), orthonormal columns");
  qr_->add_option("--r", qr_r_, "Write R here: (..., k, n), upper triangular");
  qr_->add_option("--device", qr_device_, "cpu, cuda, or auto (cuda when a GPU is present)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();

  svd_ = group_->add_subcommand(
      "svd", "Singular values (descending) and vectors, as numpy.linalg.svd(A, full_matrices=False)");
  svd_->add_option("input", svd_input_, "A.npy: (m, n) or (batch, m, n); complex128, complex64, float64 or float32")
      ->required();
  svd_->add_option("--s", svd_values_, "Write the singular values here: (..., k), k = min(m, n), descending")
      ->required();
  svd_->add_option("--u", svd_u_, "Write the left singular vectors here: (..., m, k)");
  svd_->add_option("--vh", svd_vh_, "Write the conjugate-transposed right singular vectors here: (..., k, n)");
  svd_->add_option("--device", svd_device_, "cpu, cuda, or auto (cuda when a GPU is present)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();

  rsvd_ = group_->add_subcommand(
      "rsvd", "Randomized SVD to a fixed rank (--rank) or accuracy (--tol), as numpy.linalg.svd(A, "
              "full_matrices=False) truncated; --hermitian: eigenvalues and eigenvectors of positive semi-definite "
              "matrices");
  rsvd_->add_option("input", rsvd_input_, "A.npy: (m, n) or (batch, m, n); complex128, complex64, float64 or float32")
      ->required();
  rsvd_rank_option_ = rsvd_->add_option("--rank", rsvd_rank_, "Fixed rank: the K leading singular triplets");
  rsvd_tolerance_option_ = rsvd_->add_option(
      "--tol", rsvd_tolerance_, "Fixed accuracy: each matrix's smallest rank with ‖A − U·S·Vh‖_F ≤ T·‖A‖_F");
  rsvd_max_rank_option_ =
      rsvd_->add_option("--max-rank", rsvd_max_rank_, "With --tol: at most R columns (default min(m, n))");
  rsvd_->add_flag("--absolute", rsvd_request_.absolute,
                  "With --tol: T bounds ‖A − U·S·Vh‖_F itself, not relative to ‖A‖_F");
  rsvd_->add_flag("--hermitian", rsvd_request_.hermitian,
                  "A is Hermitian positive semi-definite: S gets its largest eigenvalues, U their eigenvectors "
                  "(no --vh)");
  rsvd_->add_option("--seed", rsvd_request_.seed, "Seed of the random samples: the same seed gives the same factors")
      ->capture_default_str();
  rsvd_->add_option("--oversampling", rsvd_request_.oversampling, "With --rank: samples beyond K")
      ->capture_default_str();
  rsvd_->add_option("--power-iterations", rsvd_request_.power_iterations,
                    "Power iterations: sharper for slowly decaying singular values, for more products with A")
      ->capture_default_str();
  rsvd_->add_option("--block", rsvd_request_.block, "With --tol: samples added per step")->capture_default_str();
  rsvd_->add_option("--s", rsvd_values_,
                    "Write the singular values here (with --hermitian, the eigenvalues): (..., r), descending")
      ->required();
  rsvd_->add_option("--u", rsvd_u_, "Write the left singular vectors (eigenvectors) here: (..., m, r)");
  rsvd_->add_option("--vh", rsvd_vh_, "Write the conjugate-transposed right singular vectors here: (..., r, n)");
  rsvd_->add_option("--ranks", rsvd_ranks_, "Write each matrix's rank here: int32, (batch,) or ()");
  rsvd_->add_option("--device", rsvd_device_, "cpu, cuda, or auto (cuda when a GPU is present)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();
  rsvd_->footer("r is K, or with --tol the largest rank allowed (--max-rank, else min(m, n)); columns beyond a "
                "matrix's own rank are zero.");

  lu_ = group_->add_subcommand("lu", "LU factorisation with partial pivoting, as scipy.linalg.lu_factor");
  lu_->add_option("input", lu_input_, "A.npy: (n, n) or (batch, n, n); complex128, complex64, float64 or float32")
      ->required();
  lu_->add_option("--lu", lu_output_, "Write L (unit, below the diagonal) and U (on and above it) here, A's shape")
      ->required();
  lu_->add_option("--piv", lu_pivots_,
                  "Write the pivots here: int32 (n,) or (batch, n), from 0; row i was interchanged with row P[i]")
      ->required();
  lu_->add_option("--device", lu_device_, "cpu, cuda, or auto (cuda when a GPU is present)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();

  cholesky_ = group_->add_subcommand(
      "cholesky", "Cholesky factor of Hermitian positive definite matrices, as numpy.linalg.cholesky");
  cholesky_->add_option("input", cholesky_input_,
                        "A.npy: (n, n) or (batch, n, n); complex128, complex64, float64 or float32")
      ->required();
  cholesky_->add_option("--out", cholesky_output_, "Write the factors here, A's shape; the other triangle is zero")
      ->required();
  cholesky_->add_flag("--upper", cholesky_upper_,
                      "Upper factor U with A = Uᴴ U, from A's upper triangle (default: lower L with A = L Lᴴ, from "
                      "its lower triangle)");
  cholesky_->add_option("--device", cholesky_device_, "cpu, cuda, or auto (cuda when a GPU is present)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();

  solve_ = group_->add_subcommand(
      "solve", "Solve A X = B, as numpy.linalg.solve (numpy 2's shapes); A may be a Hermitian TLR archive (C.npz)");
  solve_->add_option("a", solve_a_,
                     "A.npy: (n, n) or (batch, n, n); complex128, complex64, float64 or float32. Or C.npz from "
                     "compress --hermitian: solved by TLR Cholesky")
      ->required();
  solve_->add_option("b", solve_b_, "B.npy, A's dtype: (n,), (n, k) or (batch, n, k); batch 1 broadcasts")
      ->required();
  solve_->add_option("--out", solve_output_, "Write X here: (..., n) for a 1-D B, else (..., n, k)")->required();
  solve_->add_option("--assume", solve_assume_,
                     "general (LU with partial pivoting) or positive (Cholesky, A Hermitian positive definite: "
                     "only its lower triangle is read)")
      ->check(CLI::IsMember({"general", "gen", "positive", "pos"}))
      ->capture_default_str();
  solve_->add_option("--device", solve_device_, "cpu, cuda, or auto (cuda when a GPU is present)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();

  compress_ = group_->add_subcommand(
      "compress", "Compress matrices to tile low-rank (TLR) or H² form in an .npz archive (layout: docs/cli.md)");
  compress_->add_option("input", compress_input_, "A.npy: (n, n) or (batch, n, n); complex128, complex64, float64 or float32")
      ->required();
  compress_->add_option("--format", compress_request_.format,
                        "Compressed form: tlr (tile low-rank), or h2 (H² on --points; one Hermitian matrix)")
      ->capture_default_str();
  compress_tile_option_ = compress_->add_option(
      "--tile", compress_request_.tile, "Tile size b: tiles of b × b, the last ragged when b does not divide n (required with tlr)");
  compress_->add_option("--points", compress_points_, "--format h2: P.npy, the points of the matrix's rows and columns");
  compress_leaf_option_ = compress_->add_option("--leaf", compress_leaf_, "--format h2: the most points a leaf holds");
  compress_eta_option_ = compress_->add_option("--eta", compress_eta_, "--format h2: admissibility parameter η");
  compress_->add_option("--tol", compress_request_.tolerance,
                        "Relative accuracy: ‖A − Ã‖_F ≤ T·‖A‖_F (--scope matrix), or per tile (--scope tile)")
      ->required();
  compress_max_rank_option_ =
      compress_->add_option("--max-rank", compress_max_rank_, "Largest rank of an off-diagonal tile (default: the tile size)");
  compress_->add_option("--scope", compress_scope_, "matrix: the tolerance bounds the whole matrix; tile: each tile")
      ->check(CLI::IsMember({"matrix", "tile"}))
      ->capture_default_str();
  compress_->add_flag("--hermitian", compress_request_.hermitian,
                      "A is Hermitian: only its lower tiles are read and stored (what solve needs)");
  compress_->add_option("--out", compress_output_, "Write the archive here (C.npz)")->required();
  compress_->add_option("--device", compress_device_, "cpu, cuda, or auto (cuda when a GPU is present)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();

  expand_ = group_->add_subcommand("expand", "The dense matrices of a TLR or H² archive (C.npz from compress or h2 build)");
  expand_->add_option("input", expand_input_, "C.npz from covflow linalg compress or covflow linalg h2 build")->required();
  expand_->add_option("--out", expand_output_, "Write the matrices here: (n, n) or (batch, n, n)")->required();
  expand_->add_option("--device", expand_device_, "cpu, cuda, or auto (cuda when a GPU is present)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();

  apply_ = group_->add_subcommand("apply", "Y = A X with A a TLR or H² archive (C.npz from compress or h2 build)");
  apply_->add_option("archive", apply_archive_, "C.npz from covflow linalg compress or covflow linalg h2 build")->required();
  apply_->add_option("x", apply_x_, "X.npy, the archive's dtype: (n,), (n, k) or (batch, n, k); batch 1 broadcasts")
      ->required();
  apply_->add_option("--out", apply_output_, "Write Y here: (..., n) for a 1-D X, else (..., n, k)")->required();
  apply_->add_option("--device", apply_device_, "cpu, cuda, or auto (cuda when a GPU is present)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();

  h2_ = group_->add_subcommand("h2", "H² matrices: hierarchical matrices with nested bases (docs/h2.md)");
  h2_->require_subcommand(1);
  h2_build_ = h2_->add_subcommand(
      "build", "Build an H² covariance matrix from a kernel on points (Chebyshev interpolation), optionally recompress "
               "it to a tolerance, into an .npz archive (layout: docs/cli.md)");
  H2BuildRequest& b = h2_request_;
  h2_build_->add_option("--points", h2_points_, "P.npy: (n, d) coordinates, d = 1, 2 or 3; float64 or float32")
      ->required();
  h2_build_->add_option("--kernel", b.kernel, "exponential, gaussian, matern or clutter (complex dtypes only)")
      ->required();
  h2_variance_option_ = h2_build_->add_option("--variance", h2_variance_, "σ² (default 1)");
  h2_length_option_ = h2_build_->add_option("--length", h2_length_, "ℓ of exponential, gaussian, matern (default 0.1)");
  h2_nu_option_ = h2_build_->add_option("--nu", h2_nu_, "matern's ν: 0.5, 1.5 or 2.5 (default 0.5)");
  h2_wavelength_option_ = h2_build_->add_option("--wavelength", h2_wavelength_, "clutter: λ in the points' unit (default 1)");
  h2_sector_center_option_ =
      h2_build_->add_option("--sector-center", h2_sector_center_, "clutter: θ₀, radians from the y axis (default 0)");
  h2_sector_width_option_ =
      h2_build_->add_option("--sector-width", h2_sector_width_, "clutter: Δ, radians, 0 < Δ ≤ 2π (default 0.5)");
  h2_build_->add_option("--nugget", b.nugget, "σ_n² added to the diagonal")->capture_default_str();
  h2_build_->add_option("--leaf", b.leaf, "The most points a leaf holds (m)")->capture_default_str();
  h2_build_->add_option("--eta", b.eta, "Admissibility: max(diam t, diam s) ≤ η·dist(t, s)")->capture_default_str();
  h2_build_->add_option("--order", b.order, "Chebyshev nodes per dimension p (rank p^d), 1 … 32")->capture_default_str();
  h2_tolerance_option_ = h2_build_->add_option(
      "--tol", h2_tolerance_, "Recompress (h2_orthogonalize + h2_compress): ‖A_H − Ã_H‖_F ≤ T·‖A_H‖_F");
  h2_build_->add_option("--dtype", b.dtype, "complex128, complex64, float64 or float32 (default: complex128 for "
                                            "clutter, float64 otherwise)");
  h2_build_->add_option("--out", h2_output_, "Write the archive here (C.npz)")->required();
  h2_build_->add_option("--device", h2_device_, "cpu, cuda, or auto (cuda when a GPU is present)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();
}

bool LinalgCommands::parsed() const { return group_->parsed(); }

int LinalgCommands::run(std::ostream& out, std::ostream& err) const {
  if (heev_->parsed()) {
    HeevRequest request;
    request.input = heev_input_;
    request.values = heev_values_;
    request.vectors = heev_vectors_;
    request.device = parse_device(heev_device_);
    request.uplo = static_cast<char>(std::toupper(static_cast<unsigned char>(heev_uplo_.empty() ? 'L' : heev_uplo_[0])));
    return run_heev(request, out, err);
  }
  if (cholupdate_->parsed()) {
    CholupdateRequest request;
    request.factor = chol_factor_;
    request.update = chol_update_;
    request.output = chol_output_;
    request.sign = chol_sign_.empty() ? '?' : chol_sign_[0];
    request.device = parse_device(chol_device_);
    return run_cholupdate(request, out, err);
  }
  if (qr_->parsed()) {
    QrRequest request;
    request.input = qr_input_;
    request.q = qr_q_;
    request.r = qr_r_;
    request.device = parse_device(qr_device_);
    return run_qr(request, out, err);
  }
  if (svd_->parsed()) {
    SvdRequest request;
    request.input = svd_input_;
    request.values = svd_values_;
    request.u = svd_u_;
    request.vh = svd_vh_;
    request.device = parse_device(svd_device_);
    return run_svd(request, out, err);
  }
  if (rsvd_->parsed()) {
    RsvdRequest request = rsvd_request_;
    request.input = rsvd_input_;
    request.values = rsvd_values_;
    request.u = rsvd_u_;
    request.vh = rsvd_vh_;
    request.ranks = rsvd_ranks_;
    if (rsvd_rank_option_->count() > 0) request.rank = rsvd_rank_;
    if (rsvd_tolerance_option_->count() > 0) request.tolerance = rsvd_tolerance_;
    if (rsvd_max_rank_option_->count() > 0) request.max_rank = rsvd_max_rank_;
    request.device = parse_device(rsvd_device_);
    return run_rsvd(request, out, err);
  }
  if (lu_->parsed()) {
    LuRequest request;
    request.input = lu_input_;
    request.lu = lu_output_;
    request.pivots = lu_pivots_;
    request.device = parse_device(lu_device_);
    return run_lu(request, out, err);
  }
  if (cholesky_->parsed()) {
    CholeskyRequest request;
    request.input = cholesky_input_;
    request.output = cholesky_output_;
    request.upper = cholesky_upper_;
    request.device = parse_device(cholesky_device_);
    return run_cholesky(request, out, err);
  }
  if (solve_->parsed()) {
    SolveRequest request;
    request.a = solve_a_;
    request.b = solve_b_;
    request.output = solve_output_;
    request.assume = solve_assume_.starts_with("pos") ? Assume::positive : Assume::general;
    request.device = parse_device(solve_device_);
    return run_solve(request, out, err);
  }
  if (compress_->parsed()) {
    CompressRequest request = compress_request_;
    request.input = compress_input_;
    request.output = compress_output_;
    request.points = compress_points_;
    if (compress_leaf_option_->count() > 0) request.leaf = compress_leaf_;
    if (compress_eta_option_->count() > 0) request.eta = compress_eta_;
    if (request.format == "tlr" && compress_tile_option_->count() == 0) {
      err << "covflow linalg compress: error: --tile is required with --format tlr\n";
      return exit_code::usage;
    }
    if (compress_max_rank_option_->count() > 0) request.max_rank = compress_max_rank_;
    request.scope = compress_scope_ == "tile" ? la::TlrScope::tile : la::TlrScope::matrix;
    request.device = parse_device(compress_device_);
    return run_compress(request, out, err);
  }
  if (expand_->parsed()) {
    ExpandRequest request;
    request.input = expand_input_;
    request.output = expand_output_;
    request.device = parse_device(expand_device_);
    return run_expand(request, out, err);
  }
  if (apply_->parsed()) {
    ApplyRequest request;
    request.archive = apply_archive_;
    request.x = apply_x_;
    request.output = apply_output_;
    request.device = parse_device(apply_device_);
    return run_apply(request, out, err);
  }
  if (h2_build_->parsed()) {
    H2BuildRequest request = h2_request_;
    request.points = h2_points_;
    request.output = h2_output_;
    const auto optional = [](const CLI::Option* option, double value) {
      return option->count() > 0 ? std::optional<double>(value) : std::nullopt;
    };
    request.variance = optional(h2_variance_option_, h2_variance_);
    request.length = optional(h2_length_option_, h2_length_);
    request.nu = optional(h2_nu_option_, h2_nu_);
    request.wavelength = optional(h2_wavelength_option_, h2_wavelength_);
    request.sector_center = optional(h2_sector_center_option_, h2_sector_center_);
    request.sector_width = optional(h2_sector_width_option_, h2_sector_width_);
    request.tolerance = optional(h2_tolerance_option_, h2_tolerance_);
    request.device = parse_device(h2_device_);
    return run_h2_build(request, out, err);
  }
  return exit_code::usage;
}

}  // namespace covflow::cli
