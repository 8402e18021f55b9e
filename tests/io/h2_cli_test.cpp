// `covflow linalg h2 build`, and `expand` and `apply` on an H² archive, through their library
// functions on the CPU: every kernel against the kernel evaluated here, apply against expand·X, the
// archive bit-identical to the library's H2 and back, --tol within its bound, and options, points
// files and archives that do not fit refused with their exit codes and messages naming the file
// and the member.
#include <chrono>
#include <filesystem>
#include <numbers>

#include "covflow/linalg/exec.hpp"
#include "covflow/linalg/h2.hpp"
#include "tlr_cli_checks.hpp"

namespace covflow::test {
namespace {

using namespace tlr_cli;
namespace la = covflow::linalg;

std::vector<double> uniform_points(std::size_t n, int dim, double extent, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.0, extent);
  std::vector<double> p(n * static_cast<std::size_t>(dim));
  for (double& v : p) v = u(rng);
  return p;
}

// Gauss–Legendre nodes and weights on [−1, 1] (Newton on the three-term recurrence).
void gauss_legendre(int count, std::vector<double>& x, std::vector<double>& w) {
  x.assign(static_cast<std::size_t>(count), 0);
  w.assign(static_cast<std::size_t>(count), 0);
  for (int i = 0; i < count; ++i) {
    double z = std::cos(std::numbers::pi * (i + 0.75) / (count + 0.5)), dp = 1;
    for (int it = 0; it < 100; ++it) {
      double p0 = 1, p1 = 0;
      for (int j = 1; j <= count; ++j) {
        const double p2 = p1;
        p1 = p0;
        p0 = ((2.0 * j - 1) * z * p1 - (j - 1.0) * p2) / j;
      }
      dp = count * (z * p0 - p1) / (z * z - 1);
      const double dz = p0 / dp;
      z -= dz;
      if (std::abs(dz) < 1e-16) break;
    }
    x[static_cast<std::size_t>(i)] = z;
    w[static_cast<std::size_t>(i)] = 2 / ((1 - z * z) * dp * dp);
  }
}

// K(x, y) of h2.hpp written from its formulas, row-major n × n (the clutter integral by
// Gauss–Legendre on many more nodes than its phase needs).
std::vector<Z> kernel_matrix(const la::H2KernelSpec& s, const std::vector<double>& p, int dim, double nugget) {
  const std::size_t n = p.size() / static_cast<std::size_t>(dim);
  std::vector<double> theta, weight, x;
  if (s.kind == la::H2Kernel::clutter) {
    gauss_legendre(80, x, weight);
    for (double t : x) theta.push_back(s.sector_center + s.sector_width / 2 * t);
  }
  std::vector<Z> a(n * n);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j <= i; ++j) {
      const double* xi = &p[i * dim];
      const double* xj = &p[j * dim];
      Z v;
      if (s.kind == la::H2Kernel::clutter) {
        const double k = 2 * std::numbers::pi / s.wavelength, dx = xi[0] - xj[0], dy = dim >= 2 ? xi[1] - xj[1] : 0.0;
        for (std::size_t q = 0; q < theta.size(); ++q)
          v += weight[q] / 2 * std::exp(Z(0, k * (dx * std::sin(theta[q]) + dy * std::cos(theta[q]))));
        v *= s.variance;
      } else {
        double r2 = 0;
        for (int d = 0; d < dim; ++d) r2 += (xi[d] - xj[d]) * (xi[d] - xj[d]);
        const double r = std::sqrt(r2) / s.length;
        double k = std::exp(-r);
        if (s.kind == la::H2Kernel::gaussian) k = std::exp(-r * r / 2);
        if (s.kind == la::H2Kernel::matern && s.nu == 1.5) k = (1 + std::sqrt(3.0) * r) * std::exp(-std::sqrt(3.0) * r);
        if (s.kind == la::H2Kernel::matern && s.nu == 2.5)
          k = (1 + std::sqrt(5.0) * r + 5 * r * r / 3) * std::exp(-std::sqrt(5.0) * r);
        v = s.variance * k;
      }
      if (i == j) v += nugget;
      a[i * n + j] = v;
      a[j * n + i] = std::conj(v);
    }
  return a;
}

double relative_difference(const std::vector<Z>& a, const std::vector<Z>& b) {
  std::vector<Z> d(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
  return norm(d) / norm(b);
}

cli::H2BuildRequest build_request(const ScratchDir& dir, const std::string& kernel) {
  cli::H2BuildRequest r;
  r.points = dir / "p.npy";
  r.output = dir / "c.npz";
  r.kernel = kernel;
  r.device = cli::DeviceChoice::cpu;
  return r;
}

Outcome expand(const ScratchDir& dir, const std::string& archive, const std::string& output = "e.npy") {
  return run_command(cli::run_expand, cli::ExpandRequest{dir / archive, dir / output, cli::DeviceChoice::cpu});
}

// Every kernel (d = 1, 2, 3; the clutter kernel on a planar array 4 wavelengths across): the
// expanded archive against the kernel evaluated directly. The bounds are those h2_test's
// construction tests reach at these orders (10⁻³ at p = 7 in 2-D, 10⁻² at p = 4 in 3-D, 10⁻⁴ at
// p = 6 in 1-D and for clutter at p = 10), with the measured errors far below.
TEST(H2Cli, BuildThenExpandMatchesTheKernel) {
  ScratchDir dir;
  std::mt19937_64 rng(fresh_seed("H2Cli.BuildExpand"));
  struct Case {
    std::string kernel;
    int dim;
    std::size_t n;
    double extent;
    int order;
    double bound;
    la::H2KernelSpec spec;
    io::NpyDtype dtype;
  };
  const std::vector<Case> cases{
      {"exponential", 2, 500, 1.0, 7, 1e-3, {la::H2Kernel::exponential, 1.0, 0.3}, io::NpyDtype::float64},
      {"gaussian", 3, 512, 1.0, 4, 1e-2, {la::H2Kernel::gaussian, 2.0, 0.3}, io::NpyDtype::float64},
      {"matern", 1, 400, 1.0, 6, 1e-4, {la::H2Kernel::matern, 1.0, 0.3, 1.5}, io::NpyDtype::float64},
      {"clutter", 2, 576, 4.0, 10, 1e-4, {la::H2Kernel::clutter, 1.0, 0.1, 0.5, 1.0, 0.3, 0.8}, io::NpyDtype::complex128}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.kernel);
    std::vector<double> p = uniform_points(c.n, c.dim, c.extent, rng);
    if (c.spec.kind == la::H2Kernel::clutter) {
      // An array: 24 × 24 elements, each moved at random within its cell. With scattered points the
      // clutter error at a given order depends on how large the admissible clusters come out.
      std::uniform_real_distribution<double> jitter(-0.4, 0.4);
      p.clear();
      for (int i = 0; i < 24; ++i)
        for (int j = 0; j < 24; ++j) {
          p.push_back((i + 0.5 + jitter(rng)) * c.extent / 24);
          p.push_back((j + 0.5 + jitter(rng)) * c.extent / 24);
        }
    }
    io::write_npy(dir / "p.npy", make_array(p, {c.n, static_cast<std::uint64_t>(c.dim)}));
    cli::H2BuildRequest r = build_request(dir, c.kernel);
    r.variance = c.spec.variance;
    if (c.spec.kind == la::H2Kernel::clutter) {
      r.wavelength = c.spec.wavelength;
      r.sector_center = c.spec.sector_center;
      r.sector_width = c.spec.sector_width;
      r.nugget = 0.5;
    } else {
      r.length = c.spec.length;
    }
    if (c.spec.kind == la::H2Kernel::matern) r.nu = c.spec.nu;
    r.leaf = c.dim == 3 ? 16 : 32;  // 3-D: leaves small enough for admissible blocks at this n
    r.eta = 1.0;
    r.order = c.order;
    const Outcome built = run_command(cli::run_h2_build, r);
    ASSERT_EQ(built.code, 0) << built.err;
    std::cout << "  " << built.out;
    EXPECT_TRUE(built.out.starts_with("h2 build: " + std::to_string(c.n) + " points in " + std::to_string(c.dim) + "-D, " +
                                      c.kernel)) << built.out;
    EXPECT_TRUE(contains(built.out, "on cpu") && contains(built.out, "wrote " + (dir / "c.npz").string())) << built.out;
    const std::vector<io::NpzMember> members = io::read_npz(dir / "c.npz");
    EXPECT_EQ(values_of<std::int32_t>(io::find_member(members, "format")->array), std::vector<std::int32_t>{2});
    EXPECT_EQ(io::find_member(members, "leaf_basis")->array.dtype, c.dtype);
    EXPECT_GT(io::find_member(members, "coupling_row")->array.shape[0], 0u) << "no admissible block: nothing is compressed";

    const Outcome e = expand(dir, "c.npz");
    ASSERT_EQ(e.code, 0) << e.err;
    EXPECT_TRUE(contains(e.out, "expand: H² n " + std::to_string(c.n))) << e.out;
    const io::NpyArray got = io::read_npy(dir / "e.npy");
    ASSERT_EQ(got.shape, Shape({c.n, c.n}));
    ASSERT_EQ(got.dtype, c.dtype);
    const std::vector<Z> expanded = c.dtype == io::NpyDtype::float64 ? as_z<double>(got) : as_z<Z>(got);
    const double error = relative_difference(expanded, kernel_matrix(c.spec, p, c.dim, r.nugget));
    std::cout << "  " << c.kernel << " d=" << c.dim << " p=" << c.order << ": ‖E − K‖_F/‖K‖_F = " << error << "\n";
    EXPECT_LT(error, c.bound);
  }
}

// The archive holds the library's H2 bit for bit (every member against h2_build's arrays, run here
// with the same options), expand gives bit for bit what h2_expand of that H2 gives, and apply
// matches expand·X to rounding for X of shape (n,), (n, k) and (batch, n, k); in complex64 too.
template <class T>
void check_round_trip_and_apply() {
  ScratchDir dir;
  std::mt19937_64 rng(fresh_seed("H2Cli.RoundTrip"));
  const std::size_t n = 500;
  const std::vector<double> p = uniform_points(n, 2, 1.0, rng);
  io::write_npy(dir / "p.npy", make_array(p, {n, 2}));
  cli::H2BuildRequest r = build_request(dir, "exponential");
  r.leaf = 32;
  r.order = 5;
  r.dtype = std::string(io::numpy_name(dtype_of<T>()));
  const Outcome built = run_command(cli::run_h2_build, r);
  ASSERT_EQ(built.code, 0) << built.err;

  la::Exec exec = la::Exec::cpu();
  const la::H2<T> h = la::h2_build<T>(exec, p, 2, la::H2KernelSpec{}, la::H2Options{32, 0.7, 5});
  const std::vector<io::NpzMember> members = io::read_npz(dir / "c.npz");
  const auto same = [&](const char* name, const auto& values) {
    const io::NpzMember* m = io::find_member(members, name);
    ASSERT_NE(m, nullptr) << name;
    using V = typename std::decay_t<decltype(values)>::value_type;
    ASSERT_EQ(m->array.bytes.size(), values.size() * sizeof(V)) << name;
    EXPECT_TRUE(values.empty() || std::memcmp(m->array.bytes.data(), values.data(), m->array.bytes.size()) == 0) << name;
  };
  same("permutation", h.tree.permutation);
  same("node_begin", h.tree.node_begin);
  same("node_end", h.tree.node_end);
  same("box", h.tree.box);
  same("rank", h.rank);
  for (const auto& [prefix, pairs] : {std::pair{std::string("coupling"), &h.couplings}, std::pair{std::string("dense"), &h.dense_pairs}}) {
    same((prefix + "_level_ptr").c_str(), pairs->level_ptr);
    same((prefix + "_row").c_str(), pairs->row);
    same((prefix + "_col").c_str(), pairs->col);
    same((prefix + "_row_ptr").c_str(), pairs->row_ptr);
    same((prefix + "_col_ptr").c_str(), pairs->col_ptr);
    same((prefix + "_col_pairs").c_str(), pairs->col_pairs);
  }
  same("leaf_basis", h.leaf_basis);
  same("transfer", h.transfer);
  same("coupling", h.coupling);
  same("dense", h.dense);
  EXPECT_EQ(io::find_member(members, "leaf_basis")->array.shape,
            Shape({std::uint64_t(1) << h.tree.depth, std::uint64_t(h.rank.back()), 32}));

  std::vector<T> reference(n * n);
  la::h2_expand<T>(exec, h, la::Batch<T>::packed(reference.data(), n, n, 1));
  ASSERT_EQ(expand(dir, "c.npz").code, 0);
  const io::NpyArray e = io::read_npy(dir / "e.npy");
  const std::vector<T> got = values_of<T>(e);  // C order: element (i, j) at i·n + j
  std::size_t differing = 0;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j)
      if (std::memcmp(&got[i * n + j], &reference[i + j * n], sizeof(T)) != 0) ++differing;
  EXPECT_EQ(differing, 0u) << "expand of the reloaded archive differs from h2_expand of the built H2";

  const std::vector<Z> a = as_z<T>(e);
  const std::size_t k = 3;
  struct Shaped {
    Shape shape;
    std::size_t blocks, cols;
  };
  for (const Shaped& s : {Shaped{{n}, 1, 1}, Shaped{{n, k}, 1, k}, Shaped{{2, n, k}, 2, k}}) {
    SCOPED_TRACE(io::format_shape(s.shape));
    const std::vector<T> x = random_normal<T>(s.blocks * n * s.cols, rng);
    io::write_npy(dir / "x.npy", make_array(x, s.shape));
    const Outcome applied =
        run_command(cli::run_apply, cli::ApplyRequest{dir / "c.npz", dir / "x.npy", dir / "y.npy", cli::DeviceChoice::cpu});
    ASSERT_EQ(applied.code, 0) << applied.err;
    EXPECT_TRUE(contains(applied.out, "apply: H² n 500, 2-D")) << applied.out;
    const io::NpyArray y = io::read_npy(dir / "y.npy");
    ASSERT_EQ(y.shape, s.shape);
    ASSERT_EQ(y.dtype, dtype_of<T>());
    const std::vector<Z> yz = as_z<T>(y), xz = as_z(x);
    for (std::size_t b = 0; b < s.blocks; ++b) {
      const std::vector<Z> xb(xz.begin() + b * n * s.cols, xz.begin() + (b + 1) * n * s.cols);
      const std::vector<Z> want = product(a, 0, xb, n, s.cols);
      std::vector<Z> diff(want.size());
      for (std::size_t i = 0; i < want.size(); ++i) diff[i] = yz[b * n * s.cols + i] - want[i];
      EXPECT_LE(norm(diff), 10 * n * eps<T>() * norm(a) * norm(xb)) << "block " << b;
    }
  }
}

TEST(H2Cli, ArchiveIsBitIdenticalAndApplyMatchesExpand) { check_round_trip_and_apply<double>(); }
TEST(H2Cli, ArchiveIsBitIdenticalAndApplyMatchesExpandComplex64) { check_round_trip_and_apply<std::complex<float>>(); }

// --tol: h2_orthogonalize + h2_compress; the archive shrinks and the expanded matrix stays within
// tol of the uncompressed one (relative), as h2_compress guarantees.
TEST(H2Cli, TolShrinksTheArchiveWithinItsBound) {
  ScratchDir dir;
  std::mt19937_64 rng(fresh_seed("H2Cli.Tol"));
  const std::size_t n = 800;
  io::write_npy(dir / "p.npy", make_array(uniform_points(n, 2, 1.0, rng), {n, 2}));
  cli::H2BuildRequest r = build_request(dir, "exponential");
  r.leaf = 32;
  ASSERT_EQ(run_command(cli::run_h2_build, r).code, 0);
  for (double tol : {1e-3, 1e-6}) {
    SCOPED_TRACE(tol);
    r.output = dir / "t.npz";
    r.tolerance = tol;
    const Outcome built = run_command(cli::run_h2_build, r);
    ASSERT_EQ(built.code, 0) << built.err;
    std::cout << "  " << built.out;
    EXPECT_TRUE(contains(built.out, "error ≤ ") && contains(built.out, "(built ")) << built.out;
    EXPECT_LT(std::filesystem::file_size(dir / "t.npz"), std::filesystem::file_size(dir / "c.npz"));
    EXPECT_EQ(values_of<std::int32_t>(io::find_member(io::read_npz(dir / "t.npz"), "orthogonal")->array),
              std::vector<std::int32_t>{1});
    ASSERT_EQ(expand(dir, "c.npz", "e.npy").code, 0);
    ASSERT_EQ(expand(dir, "t.npz", "et.npy").code, 0);
    const double error = relative_difference(as_z<double>(io::read_npy(dir / "et.npy")), as_z<double>(io::read_npy(dir / "e.npy")));
    std::cout << "  tol " << tol << ": ‖E_tol − E‖_F/‖E‖_F = " << error << "\n";
    EXPECT_LE(error, tol + 10 * n * eps<double>());
  }
}

// compress --format h2: a sample covariance (snapshots of a few plane waves and noise on a jittered
// planar array, complex128) and a kernel matrix (float64) into H² archives; expand gives each back
// within --tol, apply agrees with the dense product, and the summary line reports the bound.
TEST(H2Cli, CompressDenseMatrixWithinTheTolerance) {
  ScratchDir dir;
  const std::uint64_t seed = fresh_seed("H2Cli.CompressDense");
  std::mt19937_64 rng(seed);
  // A 16 × 16 array at half-wavelength spacing (positions in wavelengths), jittered.
  const std::size_t side = 16, n = side * side, snapshots = 600;
  std::uniform_real_distribution<double> jitter(-0.1, 0.1), angle(-1.2, 1.2);
  std::normal_distribution<double> normal(0.0, std::sqrt(0.5));
  std::vector<double> p;
  for (std::size_t i = 0; i < side; ++i)
    for (std::size_t j = 0; j < side; ++j) {
      p.push_back(0.5 * (double(i) + jitter(rng)));
      p.push_back(0.5 * (double(j) + jitter(rng)));
    }
  io::write_npy(dir / "p.npy", make_array(p, {n, 2}));
  // R = X·Xᴴ/K with X = Σ a(θ_e)·s_e + noise: three emitters 30, 20 and 10 dB over unit noise.
  std::vector<Z> x(n * snapshots);
  for (const double power_db : {30.0, 20.0, 10.0}) {
    const double az = angle(rng), amplitude = std::pow(10.0, power_db / 20);
    for (std::size_t k = 0; k < snapshots; ++k) {
      const Z s = amplitude * Z(normal(rng), normal(rng));
      for (std::size_t e = 0; e < n; ++e)
        x[e * snapshots + k] += s * std::exp(Z(0, 2 * std::numbers::pi * (p[2 * e] * std::sin(az) + p[2 * e + 1] * std::cos(az))));
    }
  }
  for (Z& v : x) v += Z(normal(rng), normal(rng));
  std::vector<Z> r(n * n);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      Z sum;
      for (std::size_t k = 0; k < snapshots; ++k) sum += x[i * snapshots + k] * std::conj(x[j * snapshots + k]);
      r[i * n + j] = sum / double(snapshots);
    }
  for (std::size_t i = 0; i < n; ++i)  // exactly Hermitian, as a covariance estimator makes it
    for (std::size_t j = 0; j < i; ++j) r[j * n + i] = std::conj(r[i * n + j]);
  io::write_npy(dir / "r.npy", make_array(r, {n, n}));
  const std::vector<Z> k = kernel_matrix({la::H2Kernel::exponential, 1.0, 2.0}, p, 2, 0.0);
  std::vector<double> k_real(k.size());
  for (std::size_t i = 0; i < k.size(); ++i) k_real[i] = k[i].real();
  io::write_npy(dir / "k.npy", make_array(k_real, {n, n}));

  for (const char* input : {"r.npy", "k.npy"})
    for (const double tol : {1e-3, 1e-7}) {
      SCOPED_TRACE(::testing::Message() << input << " tol " << tol << " seed " << seed);
      cli::CompressRequest c = compress_request(dir, 0, tol, false);
      c.input = dir / input;
      c.format = "h2";
      c.points = dir / "p.npy";
      c.leaf = 16;
      c.output = dir / "h.npz";
      const Outcome run = run_command(cli::run_compress, c);
      ASSERT_EQ(run.code, 0) << run.err;
      EXPECT_TRUE(contains(run.out, "as H² on 256 points in 2-D")) << run.out;
      EXPECT_TRUE(contains(run.out, "(bound): wrote")) << run.out;
      ASSERT_EQ(expand(dir, "h.npz").code, 0);
      const io::NpyArray e = io::read_npy(dir / "e.npy");
      const std::vector<Z> got = std::string(input) == "r.npy" ? as_z<Z>(e) : as_z<double>(e);
      const std::vector<Z> want = std::string(input) == "r.npy" ? r : k;
      const double error = relative_difference(got, want);
      EXPECT_LE(error, tol);
      RecordProperty(std::string(input) + "_error_" + std::to_string(tol), std::to_string(error));
    }
  // apply on the covariance's archive at 10⁻³ against the dense product.
  cli::CompressRequest c = compress_request(dir, 0, 1e-3, false);
  c.input = dir / "r.npy";
  c.format = "h2";
  c.points = dir / "p.npy";
  c.leaf = 16;
  c.output = dir / "h.npz";
  ASSERT_EQ(run_command(cli::run_compress, c).code, 0);
  std::vector<Z> xs(n * 3);
  std::normal_distribution<double> g(0.0, 1.0);
  for (Z& v : xs) v = Z(g(rng), g(rng));
  io::write_npy(dir / "x.npy", make_array(xs, {n, 3}));
  cli::ApplyRequest a{dir / "h.npz", dir / "x.npy", dir / "y.npy", cli::DeviceChoice::cpu};
  const Outcome applied = run_command(cli::run_apply, a);
  ASSERT_EQ(applied.code, 0) << applied.err;
  const std::vector<Z> y = as_z<Z>(io::read_npy(dir / "y.npy"));
  EXPECT_LE(relative_difference(y, product(r, 0, xs, n, 3)), 1e-3);
}

// Options, points files and archives that do not fit: each its exit code and a message naming
// the option, the file, or the archive and its member.
TEST(H2CliErrors, EachClassHasItsExitCodeAndMessage) {
  ScratchDir dir;
  std::mt19937_64 rng(fresh_seed("H2CliErrors"));
  const std::size_t n = 200;
  const std::vector<double> p = uniform_points(n, 2, 1.0, rng);
  io::write_npy(dir / "p.npy", make_array(p, {n, 2}));
  io::write_npy(dir / "p4.npy", make_array(uniform_points(n, 4, 1.0, rng), {n, 4}));
  io::write_npy(dir / "p3d.npy", make_array(p, {2, n / 2, 2}));
  io::write_npy(dir / "pint.npy", make_array(std::vector<std::int32_t>(n * 2), {n, 2}));
  std::vector<double> with_nan = p;
  with_nan[2 * 17 + 1] = std::nan("");
  io::write_npy(dir / "pnan.npy", make_array(with_nan, {n, 2}));
  const std::vector<double> a = kernel_matrices<double>(1, n, rng);
  io::write_npy(dir / "a.npy", make_array(a, {n, n}));
  io::write_npy(dir / "p_short.npy", make_array(std::vector<double>(p.begin(), p.end() - 2), {n - 1, 2}));
  std::vector<double> a2 = a;
  a2.insert(a2.end(), a.begin(), a.end());
  io::write_npy(dir / "a2.npy", make_array(a2, {2, n, n}));
  std::vector<double> skew = a;
  skew[3 * n + 150] += 0.5 * std::abs(a[3 * n + 3]);
  io::write_npy(dir / "askew.npy", make_array(skew, {n, n}));
  std::vector<double> anan = a;
  anan[7 * n + 9] = std::nan("");
  io::write_npy(dir / "anan.npy", make_array(anan, {n, n}));
  io::write_npy(dir / "x32.npy", make_array(random_normal<float>(n, rng), {n}));
  io::write_npy(dir / "short.npy", make_array(random_normal<double>(n - 1, rng), {n - 1}));

  auto build = [&](auto&& change) {
    cli::H2BuildRequest r = build_request(dir, "exponential");
    r.leaf = 16;
    r.order = 4;
    change(r);
    return run_command(cli::run_h2_build, r);
  };
  ASSERT_EQ(build([](auto&) {}).code, 0);

  struct Case {
    const char* name;
    Outcome run;
    int code;
    std::string says;
  };
  std::vector<Case> cases;
  {
    cli::CompressRequest r = compress_request(dir, 0, 1e-6, false);
    r.format = "h2";
    r.points = dir / "p.npy";
    r.output = dir / "h.npz";
    r.leaf = 16;
    ASSERT_EQ(run_command(cli::run_compress, r).code, 0) << run_command(cli::run_compress, r).err;
    auto compress = [&](auto&& change) {
      cli::CompressRequest h = r;
      change(h);
      return run_command(cli::run_compress, h);
    };
    cases.push_back({"compress_h2_no_points", compress([](auto& h) { h.points.clear(); }), exit_code::usage,
                     "--format h2 needs --points P.npy"});
    cases.push_back({"compress_h2_tile", compress([](auto& h) { h.tile = 8; }), exit_code::usage,
                     "--tile, --max-rank and --scope belong to --format tlr, not --format h2"});
    cases.push_back({"compress_h2_points_count", compress([&](auto& h) { h.points = dir / "p_short.npy"; }),
                     exit_code::input_damaged, "p_short.npy: 199 points, but the matrix of"});
    cases.push_back({"compress_h2_batch", compress([&](auto& h) { h.input = dir / "a2.npy"; }), exit_code::usage,
                     "holds 2 matrices; an H² archive holds one"});
    cases.push_back({"compress_h2_not_hermitian", compress([&](auto& h) { h.input = dir / "askew.npy"; }),
                     exit_code::input_damaged, "askew.npy: the matrix is not Hermitian"});
    cases.push_back({"compress_h2_nan", compress([&](auto& h) { h.input = dir / "anan.npy"; }), exit_code::input_damaged,
                     "anan.npy: the matrix holds a NaN or an Inf"});
    cases.push_back({"compress_h2_eta", compress([&](auto& h) { h.eta = -1.0; }), exit_code::usage,
                     "--eta must be a positive number"});
    r.format = "tlr";
    r.leaf.reset();
    r.tile = 8;
    cases.push_back({"compress_tlr_points", run_command(cli::run_compress, r), exit_code::usage,
                     "--points, --leaf and --eta belong to --format h2"});
  }
  cases.push_back({"no_points", build([](auto& r) { r.points.clear(); }), exit_code::usage, "--points is required"});
  cases.push_back({"kernel", build([](auto& r) { r.kernel = "cauchy"; }), exit_code::usage,
                   "--kernel cauchy: expected exponential, gaussian, matern or clutter"});
  cases.push_back({"clutter_real", build([](auto& r) { r.kernel = "clutter"; r.dtype = "float64"; }), exit_code::usage,
                   "--kernel clutter is a complex (Hermitian) covariance and --dtype float64 is real"});
  cases.push_back({"foreign_parameter", build([](auto& r) { r.wavelength = 0.03; }), exit_code::usage,
                   "--wavelength does not apply to --kernel exponential"});
  cases.push_back({"bad_parameter", build([](auto& r) { r.length = -1.0; }), exit_code::usage,
                   "h2_build: kernel: length -1 must be positive"});
  cases.push_back({"dtype", build([](auto& r) { r.dtype = "int32"; }), exit_code::usage, "--dtype int32: expected"});
  cases.push_back({"order", build([](auto& r) { r.order = 40; }), exit_code::usage, "--order must lie in 1 … 32, got 40"});
  cases.push_back({"tol", build([](auto& r) { r.tolerance = 0.0; }), exit_code::usage, "--tol must be a positive number"});
  cases.push_back({"points_d4", build([&](auto& r) { r.points = dir / "p4.npy"; }), exit_code::input_damaged,
                   "p4.npy: points are (200, 4) float64, expected (n, d) with d = 1, 2 or 3"});
  cases.push_back({"points_3d", build([&](auto& r) { r.points = dir / "p3d.npy"; }), exit_code::input_damaged,
                   "p3d.npy: points are (2, 100, 2) float64"});
  cases.push_back({"points_int", build([&](auto& r) { r.points = dir / "pint.npy"; }), exit_code::input_damaged,
                   "pint.npy: points are (200, 2) int32, expected float64"});
  cases.push_back({"points_nan", build([&](auto& r) { r.points = dir / "pnan.npy"; }), exit_code::input_damaged,
                   "pnan.npy: point 17 has coordinate 1 = nan"});
  cases.push_back({"points_missing", build([&](auto& r) { r.points = dir / "absent.npy"; }), exit_code::io,
                   "absent.npy: cannot open"});

  auto write_archive = [&](const std::string& name, auto&& change) {
    std::vector<io::NpzMember> members = io::read_npz(dir / "c.npz");
    change(members);
    io::write_npz(dir / name, members);
  };
  auto member = [](std::vector<io::NpzMember>& members, const char* name) -> io::NpyArray& {
    for (auto& m : members)
      if (m.name == name) return m.array;
    throw std::runtime_error(name);
  };
  auto set_int = [&](std::vector<io::NpzMember>& m, const char* name, std::size_t index, std::int32_t value) {
    std::memcpy(member(m, name).bytes.data() + index * 4, &value, 4);
  };
  write_archive("cut_entry.npz", [&](auto& m) {
    io::NpyArray& c = member(m, "coupling");
    c.shape[0] -= 1;
    c.bytes.resize(c.bytes.size() - 8);
  });
  cases.push_back({"truncated_entry", expand(dir, "cut_entry.npz"), exit_code::input_damaged,
                   "cut_entry.npz: not a valid covflow H² archive: 'coupling' is ("});
  write_archive("row_range.npz", [&](auto& m) { set_int(m, "coupling_row", 0, 9999); });
  cases.push_back({"index_range", expand(dir, "row_range.npz"), exit_code::input_damaged,
                   "row_range.npz: not a valid covflow H² archive: 'coupling_row'/'coupling_col' pair 0 is (9999,"});
  write_archive("col_pairs.npz", [&](auto& m) { set_int(m, "dense_col_pairs", 0, 1 << 30); });
  cases.push_back({"col_pairs", expand(dir, "col_pairs.npz"), exit_code::input_damaged, "'dense_col_pairs' holds 1073741824 at index 0"});
  write_archive("perm.npz", [&](auto& m) { set_int(m, "permutation", 1, values_of<std::int32_t>(member(m, "permutation"))[0]); });
  cases.push_back({"permutation", expand(dir, "perm.npz"), exit_code::input_damaged, "'permutation' is not a permutation"});
  write_archive("node.npz", [&](auto& m) { set_int(m, "node_end", 1, 3); });
  cases.push_back({"node_range", expand(dir, "node.npz"), exit_code::input_damaged, "the children of node 0 of level 0"});
  write_archive("rank.npz", [&](auto& m) { set_int(m, "rank", 0, 5000); });
  cases.push_back({"rank", expand(dir, "rank.npz"), exit_code::input_damaged, "'rank' of level 0 is 5000"});
  write_archive("offset.npz", [&](auto& m) { set_int(m, "transfer_offset", 2, 7); });
  cases.push_back({"offset", expand(dir, "offset.npz"), exit_code::input_damaged, "'transfer_offset' holds 7 at level 2"});
  write_archive("dtype.npz", [&](auto& m) {
    io::NpyArray& d = member(m, "dense");
    d.dtype = io::NpyDtype::float32;
    d.bytes.resize(d.bytes.size() / 2);
  });
  cases.push_back({"dtype", expand(dir, "dtype.npz"), exit_code::input_damaged, "'dense' is ("});
  write_archive("padding.npz", [&](auto& m) {
    // A leaf of fewer than 16 points has a zero row past its points; make one not zero.
    const double one = 1.0;
    const auto begin = values_of<std::int32_t>(member(m, "node_begin")), end = values_of<std::int32_t>(member(m, "node_end"));
    const std::size_t leaves = member(m, "leaf_basis").shape[0], first_leaf = leaves - 1;
    for (std::size_t t = 0; t < leaves; ++t)
      if (end[first_leaf + t] - begin[first_leaf + t] < 16) {
        std::memcpy(member(m, "leaf_basis").bytes.data() + (t * member(m, "leaf_basis").shape[1] * 16 + 15) * 8, &one, 8);
        break;
      }
  });
  cases.push_back({"padding", expand(dir, "padding.npz"), exit_code::input_damaged, "'leaf_basis' of leaf "});
  write_archive("no_member.npz", [](auto& m) { std::erase_if(m, [](const io::NpzMember& x) { return x.name == "dense_row"; }); });
  cases.push_back({"no_member", expand(dir, "no_member.npz"), exit_code::input_damaged, "no member 'dense_row'"});
  write_archive("format.npz", [&](auto& m) { set_int(m, "format", 0, 7); });
  cases.push_back({"format", expand(dir, "format.npz"), exit_code::input_damaged, "format.npz: archive format 7 is not one"});
  write_archive("version.npz", [&](auto& m) { set_int(m, "format_version", 0, 9); });
  cases.push_back({"version", expand(dir, "version.npz"), exit_code::input_damaged, "version.npz: H² archive format_version 9"});
  {
    std::string bytes = read_bytes(dir / "c.npz");
    write_bytes(dir / "cut.npz", bytes.substr(0, bytes.size() / 2));
  }
  cases.push_back({"truncated_file", expand(dir, "cut.npz"), exit_code::input_damaged, "cut.npz: damaged ZIP archive"});

  auto apply = [&](const std::string& archive, const std::string& x) {
    return run_command(cli::run_apply, cli::ApplyRequest{dir / archive, dir / x, dir / "y.npy", cli::DeviceChoice::cpu});
  };
  cases.push_back({"apply_dtype", apply("c.npz", "x32.npy"), exit_code::input_damaged,
                   "x32.npy: dtype float32 differs from the archive's float64"});
  cases.push_back({"apply_rows", apply("c.npz", "short.npy"), exit_code::input_damaged, "short.npy: shape (199,) float64 does not fit"});
  cases.push_back({"apply_damaged", apply("row_range.npz", "short.npy"), exit_code::input_damaged, "row_range.npz: not a valid"});
  cases.push_back({"solve_h2", run_command(cli::run_solve, cli::SolveRequest{dir / "c.npz", dir / "short.npy", dir / "s.npy",
                                                                              cli::Assume::general, cli::DeviceChoice::cpu}),
                   exit_code::input_damaged, "c.npz: an H² archive (covflow linalg h2 build); covflow linalg solve takes TLR"});

  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(c.run.code, c.code) << c.run.err;
    EXPECT_TRUE(contains(c.run.err, c.says)) << c.run.err;
    EXPECT_TRUE(c.run.err.starts_with("covflow linalg ")) << c.run.err;
  }
}

}  // namespace
}  // namespace covflow::test
