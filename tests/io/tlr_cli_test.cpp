// `covflow linalg compress`, `expand`, `apply` and `solve C.npz` through their library functions,
// on the CPU (the checks in tlr_cli_checks.hpp; heev_cli_gpu_test runs them with --device cuda), and
// archives and arguments that do not fit refused with their exit codes and messages naming the file.
#include "covflow/linalg/device.hpp"
#include "covflow/linalg/error.hpp"
#include "tlr_cli_checks.hpp"

namespace covflow::test {
namespace {

using namespace tlr_cli;

template <class T>
class TlrCli : public ::testing::Test {};
using ElementTypes = ::testing::Types<float, double, std::complex<float>, std::complex<double>>;
TYPED_TEST_SUITE(TlrCli, ElementTypes);

// compress → expand within the tolerance, for one matrix and a batch, general and Hermitian, a
// ragged last tile; the archive's members exactly as documented.
TYPED_TEST(TlrCli, CompressExpandMeetsTheToleranceAndTheLayout) {
  check_compress_expand<TypeParam>(cli::DeviceChoice::cpu);
}

// apply against the dense product of the expanded matrices (to n·ε) and the original ones (to the
// tolerance); solve's residual; X's shapes broadcast as in numpy.linalg.solve.
TYPED_TEST(TlrCli, ApplyAndSolveMatchTheDenseMatrix) { check_apply_solve<TypeParam>(cli::DeviceChoice::cpu); }

// Archives and arguments that do not fit: each its exit code and a message naming the file.
TEST(TlrCliErrors, EachClassHasItsExitCodeAndMessage) {
  ScratchDir dir;
  std::mt19937_64 rng(fresh_seed("TlrCliErrors"));
  const std::size_t n = 20;
  io::write_npy(dir / "a.npy", make_array(kernel_matrices<double>(1, n, rng), {n, n}));
  io::write_npy(dir / "x.npy", make_array(random_normal<double>(n, rng), {n}));
  io::write_npy(dir / "x32.npy", make_array(random_normal<float>(n, rng), {n}));
  io::write_npy(dir / "short.npy", make_array(random_normal<double>(n - 1, rng), {n - 1}));
  io::write_npy(dir / "rect.npy", make_array(random_normal<double>(n * 3, rng), {n, 3 * std::size_t(1)}));
  io::write_npy(dir / "int.npy", make_array(std::vector<std::int32_t>(n * n), {n, n}));
  auto compress = [&](auto&& change) {
    cli::CompressRequest r = compress_request(dir, 8, 1e-8, false);
    change(r);
    return run_command(cli::run_compress, r);
  };
  ASSERT_EQ(compress([](auto&) {}).code, 0);
  ASSERT_EQ(compress([&](auto& r) { r.hermitian = true; r.output = dir / "h.npz"; }).code, 0);

  struct Case {
    const char* name;
    Outcome run;
    int code;
    std::string says;
  };
  std::vector<Case> cases;
  cases.push_back({"format", compress([](auto& r) { r.format = "lowrank"; }), exit_code::usage,
                   "--format lowrank: expected tlr (tile low-rank) or h2 (H², with --points)"});
  cases.push_back({"tile", compress([](auto& r) { r.tile = 0; }), exit_code::usage, "--tile must be at least 1, got 0"});
  cases.push_back({"tile_past_n", compress([](auto& r) { r.tile = 21; r.max_rank = 4; }), exit_code::usage,
                   "--tile 21 is larger than the matrices of"});
  cases.push_back({"tol", compress([](auto& r) { r.tolerance = -1; }), exit_code::usage, "--tol must be a positive number"});
  cases.push_back({"max_rank", compress([](auto& r) { r.max_rank = 9; }), exit_code::usage,
                   "--max-rank must be between 1 and --tile 8, got 9"});
  cases.push_back({"not_square", compress([&](auto& r) { r.input = dir / "rect.npy"; }), exit_code::input_damaged,
                   "rect.npy: matrices must be square"});
  cases.push_back({"int32", compress([&](auto& r) { r.input = dir / "int.npy"; }), exit_code::input_damaged,
                   "int.npy: unsupported dtype '<i4' (int32) for a matrix"});
  cases.push_back({"missing", compress([&](auto& r) { r.input = dir / "absent.npy"; }), exit_code::io,
                   "absent.npy: cannot open"});
  cases.push_back({"unwritable", compress([&](auto& r) { r.output = dir / "no" / "c.npz"; }), exit_code::io,
                   "c.npz: cannot create"});
  // Without a usable GPU (a build without CUDA, or a host without a device) --device cuda is exit 6.
  bool gpu = false;
  try {
    gpu = linalg::cuda_compiled() && linalg::probe_devices().available();
  } catch (const linalg::Error&) {
  }
  if (!gpu)
    cases.push_back({"cuda", compress([&](auto& r) { r.device = cli::DeviceChoice::cuda; }),
                     exit_code::device_unavailable, "--device cuda"});

  auto expand = [&](const std::string& archive) {
    return run_command(cli::run_expand, cli::ExpandRequest{dir / archive, dir / "e.npy", cli::DeviceChoice::cpu});
  };
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
  write_archive("no_rank.npz", [](auto& m) { std::erase_if(m, [](const io::NpzMember& x) { return x.name == "rank"; }); });
  cases.push_back({"no_member", expand("no_rank.npz"), exit_code::input_damaged, "no_rank.npz: not a covflow TLR archive: no member 'rank'"});
  write_archive("version.npz", [&](auto& m) { member(m, "format_version").bytes[0] = std::byte{9}; });
  cases.push_back({"version", expand("version.npz"), exit_code::input_damaged, "version.npz: TLR archive format_version 9"});
  write_archive("bad_rank.npz", [&](auto& m) { member(m, "rank").bytes[0] = std::byte{99}; });
  cases.push_back({"rank_range", expand("bad_rank.npz"), exit_code::input_damaged, "rank 99 at flat index 0 is outside 0 … 8"});
  write_archive("order.npz", [&](auto& m) { std::swap(member(m, "tile_row").bytes[0], member(m, "tile_row").bytes[8]); });
  cases.push_back({"slot_order", expand("order.npz"), exit_code::input_damaged, "covflow's slot order puts tile"});
  write_archive("shape.npz", [&](auto& m) { member(m, "n").bytes[0] = std::byte{30}; });
  cases.push_back({"shape", expand("shape.npz"), exit_code::input_damaged, "'diag' is (3, 8, 8) float64, expected (4, 8, 8)"});
  write_archive("dtype.npz", [&](auto& m) {
    io::NpyArray& u = member(m, "u");
    u.dtype = io::NpyDtype::float32;
    u.bytes.resize(u.bytes.size() / 2);
  });
  cases.push_back({"dtype", expand("dtype.npz"), exit_code::input_damaged, "'u' is (6, 8, 8) float32, expected (6, 8, 8) float64"});
  {
    std::string bytes = read_bytes(dir / "c.npz");
    write_bytes(dir / "cut.npz", bytes.substr(0, bytes.size() / 2));
    bytes[200] = static_cast<char>(bytes[200] ^ 0x10);
    write_bytes(dir / "crc.npz", bytes);
  }
  cases.push_back({"truncated", expand("cut.npz"), exit_code::input_damaged, "cut.npz: damaged ZIP archive"});
  cases.push_back({"crc", expand("crc.npz"), exit_code::input_damaged, "crc.npz: "});
  cases.push_back({"npy_as_archive", expand("a.npy"), exit_code::input_damaged, "a.npy: not an .npz archive: this is an NPY file"});
  cases.push_back({"missing_archive", expand("absent.npz"), exit_code::io, "absent.npz: cannot open"});

  auto apply = [&](const std::string& archive, const std::string& x) {
    return run_command(cli::run_apply, cli::ApplyRequest{dir / archive, dir / x, dir / "y.npy", cli::DeviceChoice::cpu});
  };
  cases.push_back({"apply_dtype", apply("c.npz", "x32.npy"), exit_code::input_damaged, "x32.npy: dtype float32 differs from the archive's float64"});
  cases.push_back({"apply_rows", apply("c.npz", "short.npy"), exit_code::input_damaged, "short.npy: shape (19,) float64 does not fit"});
  auto solve = [&](const std::string& archive, const std::string& b) {
    return run_command(cli::run_solve, cli::SolveRequest{dir / archive, dir / b, dir / "s.npy", cli::Assume::general,
                                                         cli::DeviceChoice::cpu});
  };
  cases.push_back({"solve_general", solve("c.npz", "x.npy"), exit_code::input_damaged,
                   "c.npz: solve takes a Hermitian positive definite TLR archive"});
  cases.push_back({"solve_rows", solve("h.npz", "short.npy"), exit_code::input_damaged, "short.npy: shape (19,) float64 does not fit"});
  {
    // Not positive definite: −A compresses fine and fails its factorization, named, X NaN, exit 7.
    std::vector<double> negative = kernel_matrices<double>(1, n, rng);
    for (double& v : negative) v = -v;
    io::write_npy(dir / "neg.npy", make_array(negative, {n, n}));
    ASSERT_EQ(compress([&](auto& r) { r.input = dir / "neg.npy"; r.output = dir / "neg.npz"; r.hermitian = true; }).code, 0);
    cases.push_back({"indefinite", solve("neg.npz", "x.npy"), exit_code::numerical, "not positive definite at column 0"});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(c.run.code, c.code) << c.run.err;
    EXPECT_TRUE(contains(c.run.err, c.says)) << c.run.err;
    EXPECT_TRUE(c.run.err.starts_with("covflow linalg ")) << c.run.err;
  }
  // The dense solve is untouched by the archive dispatch.
  const Outcome dense = solve("a.npy", "x.npy");
  EXPECT_EQ(dense.code, 0) << dense.err;
  EXPECT_TRUE(contains(dense.out, "general (gesv)")) << dense.out;
}

}  // namespace
}  // namespace covflow::test
