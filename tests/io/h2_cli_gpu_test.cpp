// `covflow linalg compress --format h2 --device cuda`: the construction from a dense matrix on the
// device (h2_from_dense_device behind the command) against the same command on the CPU, on the same
// files: both archives within --tol of the input (expanded on the CPU), and within 2·tol of each
// other (each meets the tolerance; their ranks may differ by a singular value at the threshold).
// Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <numbers>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/exit_codes.hpp"
#include "common/linalg_cli.hpp"
#include "covflow/io/npy.hpp"
#include "npy_test_support.hpp"
#include "tlr_cli_checks.hpp"
#include "test_support.hpp"

namespace covflow::test {
namespace {

using Z = std::complex<double>;

class H2CliGpu : public GpuTest {};

using tlr_cli::Outcome;
using tlr_cli::run_command;

std::vector<Z> read_z(const std::filesystem::path& file) {
  const io::NpyArray a = io::read_npy(file);
  const std::size_t count = a.bytes.size() / sizeof(Z);
  std::vector<Z> out(count);
  std::memcpy(out.data(), a.bytes.data(), count * sizeof(Z));
  return out;
}

double relative(const std::vector<Z>& a, const std::vector<Z>& b) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff += std::norm(a[i] - b[i]);
    norm += std::norm(b[i]);
  }
  return std::sqrt(diff / norm);
}

TEST_F(H2CliGpu, CompressFormatH2OnTheDeviceMeetsTheToleranceAsOnTheCpu) {
  ScratchDir dir;
  const std::uint64_t seed = fresh_seed("H2CliGpu");
  std::mt19937_64 rng(seed);
  // A jittered 20 × 20 array at half-wavelength spacing; R = X·Xᴴ/K of two plane waves and noise.
  const std::size_t side = 20, n = side * side, snapshots = 3 * n;
  std::uniform_real_distribution<double> jitter(-0.1, 0.1), angle(-1.2, 1.2);
  std::normal_distribution<double> normal(0.0, std::sqrt(0.5));
  std::vector<double> p;
  for (std::size_t i = 0; i < side; ++i)
    for (std::size_t j = 0; j < side; ++j) {
      p.push_back(0.5 * (double(i) + jitter(rng)));
      p.push_back(0.5 * (double(j) + jitter(rng)));
    }
  std::vector<Z> x(n * snapshots);
  for (const double power_db : {30.0, 15.0}) {
    const double az = angle(rng), amplitude = std::pow(10.0, power_db / 20);
    for (std::size_t k = 0; k < snapshots; ++k) {
      const Z s = amplitude * Z(normal(rng), normal(rng));
      for (std::size_t e = 0; e < n; ++e)
        x[e * snapshots + k] +=
            s * std::exp(Z(0, 2 * std::numbers::pi * (p[2 * e] * std::sin(az) + p[2 * e + 1] * std::cos(az))));
    }
  }
  for (Z& v : x) v += Z(normal(rng), normal(rng));
  std::vector<Z> r(n * n);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j <= i; ++j) {
      Z sum;
      for (std::size_t k = 0; k < snapshots; ++k) sum += x[i * snapshots + k] * std::conj(x[j * snapshots + k]);
      r[i * n + j] = sum / double(snapshots);
      r[j * n + i] = std::conj(r[i * n + j]);
    }
  io::write_npy(dir / "p.npy", make_array(p, {n, 2}));
  io::write_npy(dir / "r.npy", make_array(r, {n, n}));

  for (const double tol : {1e-2, 1e-5}) {
    SCOPED_TRACE(::testing::Message() << "tol " << tol << ", seed " << seed);
    std::vector<Z> expanded[2];
    for (int d = 0; d < 2; ++d) {
      cli::CompressRequest c;
      c.input = dir / "r.npy";
      c.output = dir / (d == 0 ? "cpu.npz" : "gpu.npz");
      c.format = "h2";
      c.points = dir / "p.npy";
      c.leaf = 25;
      c.tolerance = tol;
      c.device = d == 0 ? cli::DeviceChoice::cpu : cli::DeviceChoice::cuda;
      const Outcome run = run_command(cli::run_compress, c);
      ASSERT_EQ(run.code, 0) << run.err;
      EXPECT_NE(run.out.find(d == 0 ? "on cpu" : "on cuda"), std::string::npos) << run.out;
      std::cout << "[ compress ] " << run.out;
      const std::string e = d == 0 ? "e_cpu.npy" : "e_gpu.npy";
      const Outcome expand = run_command(cli::run_expand, cli::ExpandRequest{c.output, dir / e, cli::DeviceChoice::cpu});
      ASSERT_EQ(expand.code, 0) << expand.err;
      expanded[d] = read_z(dir / e);
      EXPECT_LE(relative(expanded[d], r), tol) << (d == 0 ? "cpu" : "cuda");
    }
    EXPECT_LE(relative(expanded[1], expanded[0]), 2 * tol);
  }
}

}  // namespace
}  // namespace covflow::test
