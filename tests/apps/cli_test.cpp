// covflow and covflowd as a user runs them: each class of error has its exit code, errors go to
// stderr, --help works everywhere.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <thread>

#include "covflow/config/build_info.hpp"
#include "covflow/config/load.hpp"
#include "covflow/config/schema.hpp"
#include "covflow/io/npy.hpp"
#include "covflow/linalg/device.hpp"
#include "covflow/linalg/types.hpp"
#include "covflow/stages/ingest.hpp"
#include "covflow/stages/scenario.hpp"
#include "replay_test_support.hpp"
#include "test_support.hpp"

namespace covflow {
namespace {

struct Outcome {
  int code = -1;
  std::string out, err;
};

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs a shell command line in `dir`, capturing stdout and stderr.
Outcome run(const test::ScratchDir& dir, const std::string& command) {
  const std::string line = "cd '" + dir.path().string() + "' && " + command + " >stdout.txt 2>stderr.txt";
  const int status = std::system(line.c_str());
  Outcome r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(dir / "stdout.txt");
  r.err = slurp(dir / "stderr.txt");
  return r;
}

const std::string covflow_cli = COVFLOW_CLI;
const std::string covflowd = COVFLOWD;

TEST(Cli, HelpEverywhereAndUsageErrorsExitTwo) {
  test::ScratchDir dir;
  for (const std::string sub : {"", " version", " devices", " synth", " inspect", " record"}) {
    const Outcome r = run(dir, covflow_cli + sub + " --help");
    EXPECT_EQ(r.code, 0) << sub;
    EXPECT_NE(r.out.find("Usage:"), std::string::npos) << sub;
  }
  EXPECT_EQ(run(dir, covflowd + " --help").code, 0);
  EXPECT_EQ(run(dir, covflow_cli).code, 2);
  EXPECT_EQ(run(dir, covflow_cli + " frobnicate").code, 2);
  const Outcome no_out = run(dir, covflow_cli + " synth");
  EXPECT_EQ(no_out.code, 2);
  EXPECT_NE(no_out.err.find("--out is required"), std::string::npos) << no_out.err;
  const Outcome both = run(dir, covflow_cli + " record --synth --connect tcp://127.0.0.1:5999 -o x.cvf");
  EXPECT_EQ(both.code, 2);
  const Outcome neither = run(dir, covflow_cli + " record -o x.cvf");
  EXPECT_EQ(neither.code, 2);
  EXPECT_NE(neither.err.find("give exactly one of --synth and --connect"), std::string::npos) << neither.err;
  EXPECT_EQ(run(dir, covflowd + " --frames 0").code, 2);
}

TEST(Cli, SynthThenInspectAndVerify) {
  test::ScratchDir dir;
  const Outcome synth = run(dir, covflow_cli + " synth --out s.cvf --frames 4 --set scenario.cells=5 --set scenario.snapshots=7");
  ASSERT_EQ(synth.code, 0) << synth.err;
  EXPECT_TRUE(synth.out.empty()) << "progress and summary go to stderr: " << synth.out;
  EXPECT_NE(synth.err.find("s.cvf: 4 frames"), std::string::npos) << synth.err;

  const Outcome inspect = run(dir, covflow_cli + " inspect s.cvf --verify --records");
  ASSERT_EQ(inspect.code, 0) << inspect.err;
  EXPECT_NE(inspect.out.find("records: 4 (sequences 0 .. 3; 0 gaps, 0 out of order)"), std::string::npos) << inspect.out;
  EXPECT_NE(inspect.out.find("4 × snapshots cf64 16×7×5"), std::string::npos) << inspect.out;
  EXPECT_NE(inspect.out.find("index: present"), std::string::npos) << inspect.out;
  EXPECT_NE(inspect.out.find("damage: none"), std::string::npos) << inspect.out;
  EXPECT_TRUE(inspect.err.empty()) << inspect.err;

  // The file holds what the generator makes.
  replay::Reader reader(dir / "s.cvf");
  config::ScenarioConfig scenario;
  scenario.cells = 5;
  scenario.snapshots = 7;
  stages::ScenarioGenerator generator(scenario);
  for (std::uint64_t s = 0; s < 4; ++s) EXPECT_EQ(reader.next(), generator.frame(s));

  // An existing output is not overwritten without --force.
  const Outcome again = run(dir, covflow_cli + " synth --out s.cvf --frames 1");
  EXPECT_EQ(again.code, 5);
  EXPECT_NE(again.err.find("s.cvf: cannot create: File exists"), std::string::npos) << again.err;
  EXPECT_EQ(run(dir, covflow_cli + " synth --out s.cvf --frames 1 --force --set scenario.cells=2").code, 0);
}

TEST(Cli, VerifyNamesTheOffsetsOfDamageAndExitsFour) {
  test::ScratchDir dir;
  ASSERT_EQ(run(dir, covflow_cli + " synth -o d.cvf -n 3 --set scenario.cells=2 --set scenario.snapshots=4").code, 0);
  auto bytes = test::read_bytes(dir / "d.cvf");
  replay::Reader clean(dir / "d.cvf");
  ASSERT_TRUE(clean.index().has_value());
  const std::uint64_t second = (*clean.index())[1].offset;
  bytes[second + 100] ^= std::byte{0x01};  // in record 1's payload
  test::write_bytes(dir / "d.cvf", bytes);

  const Outcome verify = run(dir, covflow_cli + " inspect d.cvf --verify");
  EXPECT_EQ(verify.code, 4);
  EXPECT_NE(verify.out.find("records: 2"), std::string::npos) << verify.out;
  EXPECT_NE(verify.err.find("covflow: d.cvf: payload CRC: offset " + std::to_string(second) + ": record (sequence 1) CRC mismatch"),
            std::string::npos)
      << verify.err;
  // Headers alone do not see a payload flip.
  EXPECT_EQ(run(dir, covflow_cli + " inspect d.cvf").code, 0);

  test::write_bytes(dir / "cut.cvf", std::span(bytes).first(second + 20));
  const Outcome cut = run(dir, covflow_cli + " inspect cut.cvf");
  EXPECT_EQ(cut.code, 4);
  EXPECT_NE(cut.err.find("truncated: offset " + std::to_string(second)), std::string::npos) << cut.err;

  std::ofstream(dir / "notes.txt") << "these are notes, not frames; long enough for a header";
  const Outcome foreign = run(dir, covflow_cli + " inspect notes.txt");
  EXPECT_EQ(foreign.code, 4);
  EXPECT_NE(foreign.err.find("covflow: error: notes.txt: offset 0: bad magic"), std::string::npos) << foreign.err;
  const Outcome missing = run(dir, covflow_cli + " inspect nothing.cvf");
  EXPECT_EQ(missing.code, 5);
  EXPECT_EQ(missing.err, "covflow: error: nothing.cvf: cannot open: No such file or directory\n");
}

TEST(Cli, ConfigErrorsExitThree) {
  test::ScratchDir dir;
  const Outcome r = run(dir, covflow_cli + " synth -o x.cvf --set scenario.elemnts=8");
  EXPECT_EQ(r.code, 3);
  EXPECT_EQ(r.err,
            "covflow: error: --set: scenario.elemnts: unknown key; expected one of geometry, elements, spacing_wavelengths, "
            "planar, positions, sources, jammers, clutter, snapshots, cells, frame_rate_hz, seed, payload, covariance, "
            "element_type; did you mean 'scenario.elements'?\n");
  EXPECT_FALSE(std::filesystem::exists(dir / "x.cvf"));
  const Outcome missing = run(dir, covflow_cli + " synth -o x.cvf --config nowhere.yaml");
  EXPECT_EQ(missing.code, 3);
  EXPECT_EQ(missing.err, "covflow: error: nowhere.yaml: -: cannot read the file (No such file or directory)\n");
}

TEST(Cli, RecordFromTheGeneratorAndFromAZeroMqFeed) {
  test::ScratchDir dir;
  const Outcome synth = run(dir, covflow_cli + " record --synth -o live.cvf -n 3 --set scenario.frame_rate_hz=50 --set scenario.cells=2");
  ASSERT_EQ(synth.code, 0) << synth.err;
  replay::Reader live(dir / "live.cvf");
  const auto frames = test::read_all(live);
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[2].header.capture_time_ns - frames[0].header.capture_time_ns, 40'000'000);

  stages::ZmqFramePublisher publisher("tcp://127.0.0.1:*", stages::ZmqFramePublisher::Pattern::push);
  Outcome recorded;
  std::thread recorder([&] { recorded = run(dir, covflow_cli + " record --connect " + publisher.endpoint() + " --pattern pull -o feed.cvf -n 2"); });
  config::ScenarioConfig scenario;
  scenario.cells = 3;
  stages::ScenarioGenerator generator(scenario);
  const replay::Frame first = generator.next(), second = generator.next();
  publisher.send(first);  // blocks until the recorder has connected
  publisher.send_raw(std::vector<std::byte>(10));
  publisher.send(second);
  recorder.join();
  ASSERT_EQ(recorded.code, 0) << recorded.err;
  EXPECT_NE(recorded.err.find("1 messages rejected"), std::string::npos) << recorded.err;
  replay::Reader feed(dir / "feed.cvf");
  EXPECT_EQ(feed.next(), first);
  EXPECT_EQ(feed.next(), second);
}

TEST(Cli, CovflowdChecksPrintsAndRunsConfigurations) {
  test::ScratchDir dir;
  std::ofstream(dir / "bad.yaml") << "pipeline:\n  stages:\n    subspace:\n      source_count: bic\n";
  const Outcome bad = run(dir, covflowd + " --check-config bad.yaml");
  EXPECT_EQ(bad.code, 3);
  EXPECT_EQ(bad.err, "covflowd: bad.yaml:4: pipeline.stages.subspace.source_count: expected one of mdl, aic (got bic); did you mean 'aic'?\n");
  const Outcome missing = run(dir, covflowd + " --check-config none.yaml");
  EXPECT_EQ(missing.code, 3);
  EXPECT_EQ(missing.err, "covflowd: none.yaml: -: cannot read the file (No such file or directory)\n");
  const Outcome good_with_bad_set = run(dir, covflowd + " --check-config " COVFLOW_SOURCE_DIR "/config/examples/default.yaml --set pipeline.queue_depth=0");
  EXPECT_EQ(good_with_bad_set.code, 3);
  for (const auto& [program, name] : {std::pair{covflowd, "covflowd "}, std::pair{covflow_cli, "covflow "}}) {
    const Outcome version = run(dir, program + " --version");
    EXPECT_EQ(version.code, 0) << program;
    EXPECT_TRUE(version.out.starts_with(name + config::build_info().version)) << version.out;
  }
  EXPECT_EQ(run(dir, covflowd + " --config bad.yaml --frames 1").code, 3);

  // --print-config writes a file that reads back to the same configuration.
  const Outcome printed = run(dir, covflowd + " --print-config --set scenario.elements=9 --set device.gpus=[2]");
  ASSERT_EQ(printed.code, 0) << printed.err;
  EXPECT_EQ(config::load_string(printed.out, "printed"), config::load_defaults(std::vector<std::string>{"scenario.elements=9", "device.gpus=[2]"}));
  const Outcome reference = run(dir, covflowd + " --print-config-reference");
  EXPECT_EQ(reference.out, config::reference_markdown());

  // The daemon on the built-in scenario: 3 frames, then the final report on stdout. Its sockets go
  // to this test's directory, so a daemon already running on the default ports does not matter.
  const std::string ipc = " --set daemon.results_endpoint=ipc://" + (dir / "r").string() +
                          " --set daemon.reports_endpoint=ipc://" + (dir / "p").string() +
                          " --set daemon.control_endpoint=ipc://" + (dir / "c").string();
  const Outcome demo = run(dir, covflowd + " --frames 3 --device cpu --set scenario.cells=4 --set daemon.log_level=error" + ipc);
  EXPECT_EQ(demo.code, 0) << demo.err;
  EXPECT_NE(demo.out.find("covflowd final report"), std::string::npos) << demo.out;
  EXPECT_NE(demo.out.find("frames: in 3  done 3  late "), std::string::npos) << demo.out;
  EXPECT_NE(demo.out.find("dropped 0  in flight 0"), std::string::npos) << demo.out;
  EXPECT_TRUE(demo.err.empty()) << "a clean run logs nothing at log_level error: " << demo.err;
  if (!linalg::probe_devices().available()) {
    const Outcome cuda = run(dir, covflowd + " --frames 1 --device cuda");
    EXPECT_EQ(cuda.code, 6) << cuda.err;
  }
}

TEST(Cli, CovflowdReplaysAFileInTheShapeOfItsRecords) {
  // A recorded 24-element cf32 file and a configuration with no scenario section: the pipeline is
  // sized from the file's first record, so every frame goes through (none dropped for its shape).
  test::ScratchDir dir;
  const Outcome synth = run(dir, covflow_cli + " synth -o small.cvf -n 12 --set scenario.elements=24 "
                                               "--set scenario.element_type=cf32 --set scenario.cells=6 "
                                               "--set scenario.snapshots=64");
  ASSERT_EQ(synth.code, 0) << synth.err;
  const std::string ipc = "ipc://" + dir.path().string() + "/";
  std::ofstream(dir / "replay.yaml") << "daemon:\n  results_endpoint: " << ipc << "r\n  reports_endpoint: " << ipc
                                     << "p\n  control_endpoint: " << ipc << "c\n"
                                     << "device:\n  backend: cpu\n"
                                     << "ingest:\n  source: file\n  file:\n    path: small.cvf\n    pace: fast\n"
                                     << "pipeline:\n  budget_ms: 5000\n  overflow: block\n";
  const Outcome replay = run(dir, covflowd + " --config replay.yaml");
  EXPECT_EQ(replay.code, 0) << replay.err;
  EXPECT_NE(replay.out.find("frames: in 12  done 12  late 0  dropped 0  in flight 0"), std::string::npos) << replay.out;
  EXPECT_NE(replay.err.find("frames: snapshots 24 × 64 × 6 cf32"), std::string::npos) << replay.err;
  EXPECT_EQ(replay.err.find("dropped (shape)"), std::string::npos) << replay.err;

  // Covariance records do not say how many snapshots each estimate was formed from: the key that
  // must say it is named, as a configuration error.
  ASSERT_EQ(run(dir, covflow_cli + " synth -o cov.cvf -n 3 --set scenario.payload=covariance --set scenario.cells=2").code, 0);
  std::ofstream(dir / "cov.yaml") << "daemon:\n  results_endpoint: " << ipc << "r\n  reports_endpoint: " << ipc
                                  << "p\n  control_endpoint: " << ipc << "c\n"
                                  << "device:\n  backend: cpu\n"
                                  << "ingest:\n  source: file\n  file:\n    path: cov.cvf\n    pace: fast\n";
  const Outcome no_k = run(dir, covflowd + " --config cov.yaml");
  EXPECT_EQ(no_k.code, 3) << no_k.err;
  EXPECT_NE(no_k.err.find("cov.yaml: ingest.file.covariance_snapshots: required: cov.cvf holds covariance records"),
            std::string::npos)
      << no_k.err;
  const Outcome with_k = run(dir, covflowd + " --config cov.yaml --set ingest.file.covariance_snapshots=200");
  EXPECT_EQ(with_k.code, 0) << with_k.err;
  EXPECT_NE(with_k.out.find("frames: in 3  done 3"), std::string::npos) << with_k.out;
}

// pipeline.stages.subspace.method: svd runs on snapshot frames and is refused, naming the key, for
// covariance frames: at load time for the generator, when the file is opened for a frame file.
TEST(Cli, CovflowdSvdMethodRunsOnSnapshotsAndRefusesCovarianceInput) {
  test::ScratchDir dir;
  const std::string ipc = "ipc://" + dir.path().string() + "/";
  const std::string sockets = " --set daemon.results_endpoint=" + ipc + "r --set daemon.reports_endpoint=" + ipc +
                              "p --set daemon.control_endpoint=" + ipc + "c --set daemon.log_level=error";
  const Outcome svd = run(dir, covflowd + " --frames 3 --device cpu --set scenario.cells=4 "
                                          "--set pipeline.stages.subspace.method=svd" + sockets);
  EXPECT_EQ(svd.code, 0) << svd.err;
  EXPECT_NE(svd.out.find("frames: in 3  done 3  late "), std::string::npos) << svd.out;

  const Outcome generated = run(dir, covflowd + " --frames 1 --set scenario.payload=covariance "
                                                "--set pipeline.stages.subspace.method=svd" + sockets);
  EXPECT_EQ(generated.code, 3) << generated.err;
  EXPECT_NE(generated.err.find("--set: pipeline.stages.subspace.method: expected eig for an input of covariance frames "
                               "(scenario.payload is 'covariance')"),
            std::string::npos)
      << generated.err;

  ASSERT_EQ(run(dir, covflow_cli + " synth -o cov.cvf -n 2 --set scenario.payload=covariance --set scenario.cells=2").code, 0);
  const Outcome replayed = run(dir, covflowd + " --device cpu --set ingest.source=file --set ingest.file.path=cov.cvf "
                                               "--set ingest.file.pace=fast --set ingest.file.covariance_snapshots=200 "
                                               "--set pipeline.stages.subspace.method=svd" + sockets);
  EXPECT_EQ(replayed.code, 3) << replayed.err;
  EXPECT_NE(replayed.err.find("covflowd: error: input: pipeline.stages.subspace.method: expected eig for an input of "
                              "covariance frames (covariance 2 × 16² cf64 (K = 200))"),
            std::string::npos)
      << replayed.err;
}

// ---- covflow linalg qr / svd ------------------------------------------------------------------
// The binary on files written as numpy.save writes them, its outputs read back and checked in
// double against numpy.linalg's conventions: qr as numpy.linalg.qr(A, mode="reduced") (Q (…, m, k),
// R (…, k, n) upper triangular, A = QR, QᴴQ = I), svd as numpy.linalg.svd(A, full_matrices=False)
// (S (…, k) descending and non-negative, U (…, m, k), Vh = Vᴴ (…, k, n), A = U·diag(S)·Vh).
// Tolerances are multiples of max(m, n)·ε of the file's precision.

using cd = std::complex<double>;
using Shape = std::vector<std::uint64_t>;

template <class T> io::NpyDtype dtype_of() {
  if constexpr (std::is_same_v<T, linalg::cf64>) return io::NpyDtype::complex128;
  else if constexpr (std::is_same_v<T, linalg::cf32>) return io::NpyDtype::complex64;
  else if constexpr (std::is_same_v<T, double>) return io::NpyDtype::float64;
  else return io::NpyDtype::float32;
}

template <class T>
void save_npy(const std::filesystem::path& file, const Shape& shape, const std::vector<T>& data) {
  io::NpyArray array;
  array.dtype = dtype_of<T>();
  array.shape = shape;
  array.bytes.resize(data.size() * sizeof(T));
  if (!data.empty()) std::memcpy(array.bytes.data(), data.data(), array.bytes.size());
  io::write_npy(file, array);
}

// An output file, checked to have `shape` and `dtype` in C order, as complex doubles.
std::vector<cd> load_npy(const std::filesystem::path& file, const Shape& shape, io::NpyDtype dtype) {
  const io::NpyArray array = io::read_npy(file);
  EXPECT_EQ(array.shape, shape) << file;
  EXPECT_EQ(array.dtype, dtype) << file;
  EXPECT_FALSE(array.fortran_order) << file;
  std::vector<cd> out(array.element_count());
  auto convert = [&]<class T>(T*) {
    for (std::size_t i = 0; i < out.size(); ++i) {
      T v;
      std::memcpy(&v, array.bytes.data() + i * sizeof(T), sizeof(T));
      out[i] = cd(v);
    }
  };
  switch (array.dtype) {
    case io::NpyDtype::complex128: convert(static_cast<linalg::cf64*>(nullptr)); break;
    case io::NpyDtype::complex64: convert(static_cast<linalg::cf32*>(nullptr)); break;
    case io::NpyDtype::float64: convert(static_cast<double*>(nullptr)); break;
    case io::NpyDtype::float32: convert(static_cast<float*>(nullptr)); break;
    case io::NpyDtype::int32: ADD_FAILURE() << file << ": int32, not a matrix"; break;
  }
  return out;
}

// Row-major products and norms of one matrix of a batch, in double.
struct View {
  const cd* data;
  std::size_t rows, cols;
  cd operator()(std::size_t i, std::size_t j) const { return data[i * cols + j]; }
};
View matrix(const std::vector<cd>& batch, std::size_t index, std::size_t rows, std::size_t cols) {
  return {batch.data() + index * rows * cols, rows, cols};
}
// ‖X·Y − Z‖_F, with X and Y as given or conjugate-transposed (h).
double product_error(View x, bool xh, View y, bool yh, const std::vector<cd>& z) {
  const std::size_t rows = xh ? x.cols : x.rows, inner = xh ? x.rows : x.cols, cols = yh ? y.rows : y.cols;
  double sum = 0;
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) {
      cd acc = 0;
      for (std::size_t l = 0; l < inner; ++l)
        acc += (xh ? std::conj(x(l, i)) : x(i, l)) * (yh ? std::conj(y(j, l)) : y(l, j));
      sum += std::norm(acc - z[i * cols + j]);
    }
  return std::sqrt(sum);
}
std::vector<cd> identity(std::size_t n) {
  std::vector<cd> out(n * n);
  for (std::size_t i = 0; i < n; ++i) out[i * n + i] = 1.0;
  return out;
}
double frobenius(View x) {
  double sum = 0;
  for (std::size_t i = 0; i < x.rows * x.cols; ++i) sum += std::norm(x.data[i]);
  return std::sqrt(sum);
}

// Test inputs: random, rank-deficient (column 1 repeats column 0) and graded (column j scaled by
// 10^(−j·span/n), span 6 in single precision, 12 in double).
enum class Kind { random, rank_deficient, graded };
template <class T>
std::vector<T> make_matrices(std::size_t count, std::size_t m, std::size_t n, Kind kind, std::mt19937_64& rng) {
  auto a = test::random_normal<T>(count * m * n, rng);
  for (std::size_t b = 0; b < count; ++b) {
    T* x = a.data() + b * m * n;
    if (kind == Kind::rank_deficient && n > 1) {
      for (std::size_t i = 0; i < m; ++i) x[i * n + 1] = x[i * n];
    } else if (kind == Kind::graded) {
      const double span = std::is_same_v<linalg::real_t<T>, float> ? 6.0 : 12.0;
      for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j) x[i * n + j] *= static_cast<linalg::real_t<T>>(std::pow(10.0, -span * j / n));
    }
  }
  return a;
}

std::string shape_text(const Shape& shape) { return io::format_shape(shape); }

template <class T>
void check_qr_case(const test::ScratchDir& dir, std::size_t count, bool batched, std::size_t m, std::size_t n, Kind kind,
                   std::mt19937_64& rng) {
  const std::size_t k = std::min(m, n);
  const double eps = std::numeric_limits<linalg::real_t<T>>::epsilon();
  const double tolerance = 10.0 * std::max(m, n) * eps;
  const auto a = make_matrices<T>(count, m, n, kind, rng);
  const Shape shape = batched ? Shape{count, m, n} : Shape{m, n};
  const Shape q_shape = batched ? Shape{count, m, k} : Shape{m, k}, r_shape = batched ? Shape{count, k, n} : Shape{k, n};
  const std::string name = std::string(io::numpy_name(dtype_of<T>())) + " " + shape_text(shape) + " kind " +
                           std::to_string(int(kind));
  SCOPED_TRACE(name);
  save_npy(dir / "a.npy", shape, a);
  const Outcome r = run(dir, covflow_cli + " linalg qr a.npy --q q.npy --r r.npy --device cpu");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  const std::string matrices = batched ? std::to_string(count) + " matrices " : std::string("one matrix ");
  EXPECT_EQ(r.out, "qr: " + matrices + std::to_string(m) + "×" + std::to_string(n) + " " +
                       std::string(io::numpy_name(dtype_of<T>())) + " on cpu: wrote q.npy " + shape_text(q_shape) + " " +
                       std::string(io::numpy_name(dtype_of<T>())) + " and r.npy " + shape_text(r_shape) + " " +
                       std::string(io::numpy_name(dtype_of<T>())) + "\n");
  const auto q = load_npy(dir / "q.npy", q_shape, dtype_of<T>());
  const auto rr = load_npy(dir / "r.npy", r_shape, dtype_of<T>());
  std::vector<cd> a64(a.begin(), a.end());
  for (std::size_t b = 0; b < count; ++b) {
    const View qb = matrix(q, b, m, k), rb = matrix(rr, b, k, n), ab = matrix(a64, b, m, n);
    const std::vector<cd> a_b(ab.data, ab.data + m * n);
    EXPECT_LE(product_error(qb, false, rb, false, a_b), tolerance * std::max(frobenius(ab), 1e-300)) << "QR = A, matrix " << b;
    EXPECT_LE(product_error(qb, true, qb, false, identity(k)), tolerance) << "QᴴQ = I, matrix " << b;
    for (std::size_t i = 0; i < k; ++i)
      for (std::size_t j = 0; j < std::min(i, n); ++j) EXPECT_EQ(rb(i, j), cd(0)) << "R below the diagonal, matrix " << b;
  }
}

template <class T>
void check_svd_case(const test::ScratchDir& dir, std::size_t count, bool batched, std::size_t m, std::size_t n, Kind kind,
                    std::mt19937_64& rng) {
  const std::size_t k = std::min(m, n);
  const double eps = std::numeric_limits<linalg::real_t<T>>::epsilon();
  const double tolerance = 10.0 * std::max(m, n) * eps;
  const auto a = make_matrices<T>(count, m, n, kind, rng);
  const Shape shape = batched ? Shape{count, m, n} : Shape{m, n};
  const Shape s_shape = batched ? Shape{count, k} : Shape{k};
  const Shape u_shape = batched ? Shape{count, m, k} : Shape{m, k}, vh_shape = batched ? Shape{count, k, n} : Shape{k, n};
  const io::NpyDtype real = io::real_dtype(dtype_of<T>());
  const std::string type = std::string(io::numpy_name(dtype_of<T>()));
  SCOPED_TRACE(type + " " + shape_text(shape) + " kind " + std::to_string(int(kind)));
  save_npy(dir / "a.npy", shape, a);
  const Outcome r = run(dir, covflow_cli + " linalg svd a.npy --s s.npy --u u.npy --vh vh.npy --device cpu");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  const std::string matrices = batched ? std::to_string(count) + " matrices " : std::string("one matrix ");
  EXPECT_EQ(r.out, "svd: " + matrices + std::to_string(m) + "×" + std::to_string(n) + " " + type + " on cpu: wrote s.npy " +
                       shape_text(s_shape) + " " + std::string(io::numpy_name(real)) + ", u.npy " + shape_text(u_shape) +
                       " " + type + " and vh.npy " + shape_text(vh_shape) + " " + type + "\n");
  const auto sv = load_npy(dir / "s.npy", s_shape, real);
  const auto u = load_npy(dir / "u.npy", u_shape, dtype_of<T>());
  const auto vh = load_npy(dir / "vh.npy", vh_shape, dtype_of<T>());
  std::vector<cd> a64(a.begin(), a.end());
  for (std::size_t b = 0; b < count; ++b) {
    const View ab = matrix(a64, b, m, n), ub = matrix(u, b, m, k), vb = matrix(vh, b, k, n);
    // U·diag(S): scale U's columns.
    std::vector<cd> us(ub.data, ub.data + m * k);
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < k; ++j) us[i * k + j] *= sv[b * k + j];
    for (std::size_t j = 0; j < k; ++j) {
      EXPECT_EQ(sv[b * k + j].imag(), 0.0);
      EXPECT_GE(sv[b * k + j].real(), 0.0) << "S[" << j << "], matrix " << b;
      if (j > 0) {
        EXPECT_LE(sv[b * k + j].real(), sv[b * k + j - 1].real()) << "S not descending, matrix " << b;
      }
    }
    const std::vector<cd> a_b(ab.data, ab.data + m * n);
    EXPECT_LE(product_error(matrix(us, 0, m, k), false, vb, false, a_b), tolerance * std::max(frobenius(ab), 1e-300))
        << "U·diag(S)·Vh = A, matrix " << b;
    EXPECT_LE(product_error(ub, true, ub, false, identity(k)), tolerance) << "UᴴU = I, matrix " << b;
    EXPECT_LE(product_error(vb, false, vb, true, identity(k)), tolerance) << "Vh·Vhᴴ = I, matrix " << b;
  }
  // --s alone: the same singular values, and nothing else written.
  std::filesystem::remove(dir / "u.npy");
  const Outcome values_only = run(dir, covflow_cli + " linalg svd a.npy --s s2.npy --device cpu");
  ASSERT_EQ(values_only.code, 0) << values_only.err;
  const auto s2 = load_npy(dir / "s2.npy", s_shape, real);
  for (std::size_t i = 0; i < s2.size(); ++i) EXPECT_NEAR(s2[i].real(), sv[i].real(), tolerance * std::abs(sv[i - i % k]));
  EXPECT_FALSE(std::filesystem::exists(dir / "u.npy"));
}

template <class T>
void check_qr_and_svd_for(const test::ScratchDir& dir, std::mt19937_64& rng) {
  struct Case {
    std::size_t count;
    bool batched;
    std::size_t m, n;
    bool every_kind;  // rank-deficient and graded too (each run is a process: CI time)
  };
  // Tall, wide (m < n: Q from the leading m × m block), square, single column and row, batches.
  const Case cases[] = {{1, false, 7, 4, true},  {1, false, 3, 8, true},  {4, true, 6, 6, false},
                        {3, true, 9, 5, false},  {3, true, 4, 10, true},  {2, true, 5, 1, false},
                        {2, true, 1, 5, false},  {1, false, 40, 33, true}};
  for (const Case& c : cases)
    for (Kind kind : {Kind::random, Kind::rank_deficient, Kind::graded}) {
      if (kind != Kind::random && !c.every_kind) continue;
      check_qr_case<T>(dir, c.count, c.batched, c.m, c.n, kind, rng);
      check_svd_case<T>(dir, c.count, c.batched, c.m, c.n, kind, rng);
    }
}

TEST(CliLinalg, QrAndSvdFollowNumpyConventionsForEveryDtypeAndShape) {
  test::ScratchDir dir;
  std::mt19937_64 rng(test::fresh_seed("covflow linalg qr/svd"));
  check_qr_and_svd_for<linalg::cf64>(dir, rng);
  check_qr_and_svd_for<linalg::cf32>(dir, rng);
  check_qr_and_svd_for<double>(dir, rng);
  check_qr_and_svd_for<float>(dir, rng);
}

// A matrix with a NaN or an Inf does not stop the batch: its outputs are NaN, stderr names it as
// heev names its failures, the others are right, and the exit code is 7.
TEST(CliLinalg, QrAndSvdNameANonFiniteMatrixWriteItAsNanAndExitSeven) {
  test::ScratchDir dir;
  std::mt19937_64 rng(test::fresh_seed("covflow linalg qr/svd non-finite"));
  auto a = test::random_normal<linalg::cf64>(3 * 5 * 4, rng);
  a[1 * 20 + 2 * 4 + 3] = linalg::cf64(std::numeric_limits<double>::quiet_NaN(), 0.0);
  a[2 * 20 + 0] = linalg::cf64(0.0, std::numeric_limits<double>::infinity());
  save_npy(dir / "a.npy", {3, 5, 4}, a);
  const Outcome qr = run(dir, covflow_cli + " linalg qr a.npy --q q.npy --r r.npy --device cpu");
  EXPECT_EQ(qr.code, 7) << qr.err;
  EXPECT_EQ(qr.err, "covflow linalg qr: a.npy: 2 of 3 matrices failed, written as NaN in q.npy and r.npy: matrices 1, 2 "
                    "(NaN or Inf in the matrix)\n");
  const auto q = load_npy(dir / "q.npy", {3, 5, 4}, io::NpyDtype::complex128);
  const auto r = load_npy(dir / "r.npy", {3, 4, 4}, io::NpyDtype::complex128);
  for (std::size_t i = 20; i < 60; ++i) EXPECT_TRUE(std::isnan(q[i].real())) << i;
  for (std::size_t i = 16; i < 48; ++i) EXPECT_TRUE(std::isnan(r[i].real())) << i;
  std::vector<cd> a0(a.begin(), a.begin() + 20);
  EXPECT_LE(product_error(matrix(q, 0, 5, 4), false, matrix(r, 0, 4, 4), false, a0), 1e-13 * frobenius(matrix(a0, 0, 5, 4)));

  const Outcome svd = run(dir, covflow_cli + " linalg svd a.npy --s s.npy --u u.npy --vh vh.npy --device cpu");
  EXPECT_EQ(svd.code, 7) << svd.err;
  EXPECT_EQ(svd.err, "covflow linalg svd: a.npy: 2 of 3 matrices failed, written as NaN in s.npy, u.npy and vh.npy: "
                     "matrices 1, 2 (NaN or Inf in the matrix)\n");
  const auto s = load_npy(dir / "s.npy", {3, 4}, io::NpyDtype::float64);
  for (std::size_t i = 4; i < 12; ++i) EXPECT_TRUE(std::isnan(s[i].real())) << i;
  for (std::size_t i = 0; i < 4; ++i) EXPECT_FALSE(std::isnan(s[i].real())) << i;

  // One matrix alone: "the matrix failed".
  save_npy(dir / "one.npy", {2, 2}, std::vector<double>{1.0, std::numeric_limits<double>::infinity(), 0.0, 1.0});
  const Outcome one = run(dir, covflow_cli + " linalg svd one.npy --s s1.npy --device cpu");
  EXPECT_EQ(one.code, 7);
  EXPECT_EQ(one.err, "covflow linalg svd: one.npy: the matrix failed (NaN or Inf in the matrix), written as NaN in s1.npy\n");
}

TEST(CliLinalg, QrAndSvdOfEmptyMatricesWriteEmptyOutputs) {
  test::ScratchDir dir;
  save_npy(dir / "e.npy", {3, 0, 4}, std::vector<double>{});
  const Outcome qr = run(dir, covflow_cli + " linalg qr e.npy --q q.npy --r r.npy --device cpu");
  ASSERT_EQ(qr.code, 0) << qr.err;
  load_npy(dir / "q.npy", {3, 0, 0}, io::NpyDtype::float64);
  load_npy(dir / "r.npy", {3, 0, 4}, io::NpyDtype::float64);
  const Outcome svd = run(dir, covflow_cli + " linalg svd e.npy --s s.npy --u u.npy --vh vh.npy --device cpu");
  ASSERT_EQ(svd.code, 0) << svd.err;
  load_npy(dir / "s.npy", {3, 0}, io::NpyDtype::float64);
  load_npy(dir / "u.npy", {3, 0, 0}, io::NpyDtype::float64);
  load_npy(dir / "vh.npy", {3, 0, 4}, io::NpyDtype::float64);
}

// Every class of error has heev's exit code and a one-line message naming the file.
TEST(CliLinalg, QrSvdAndRsvdErrorsHaveTheirExitCodes) {
  test::ScratchDir dir;
  save_npy(dir / "ok.npy", {3, 2}, std::vector<double>{1, 2, 3, 4, 5, 6});
  save_npy(dir / "flat.npy", {6}, std::vector<double>{1, 2, 3, 4, 5, 6});
  save_npy(dir / "sq.npy", {2, 2}, std::vector<double>{2, 1, 1, 2});
  save_npy(dir / "rank4.npy", {1, 1, 2, 2}, std::vector<double>{1, 2, 3, 4});
  {
    // int32: a well-formed file that no linear algebra takes.
    io::NpyArray ints{io::NpyDtype::int32, {2, 2}, false, std::vector<std::byte>(16)};
    io::write_npy(dir / "int.npy", ints);
  }
  const auto ok_bytes = test::read_bytes(dir / "ok.npy");
  test::write_bytes(dir / "short.npy", std::span(ok_bytes).first(ok_bytes.size() - 8));
  auto bad_magic = ok_bytes;
  bad_magic[1] = std::byte{'X'};
  test::write_bytes(dir / "magic.npy", bad_magic);
  // A header naming more matrices than a batch may hold: 0 × 0 matrices hold no data, so nothing
  // else bounds the count.
  save_npy(dir / "many.npy", {std::uint64_t(1) << 31, 0, 0}, std::vector<double>{});

  struct Case {
    std::string args;
    int code;
    std::string phrase;
  };
  const Case cases[] = {
      {"linalg qr ok.npy", 2, "give --q, --r or both"},
      {"linalg qr ok.npy --q x.npy --r x.npy", 2, "--q and --r name the same file"},
      {"linalg svd ok.npy", 2, "--s is required"},
      {"linalg svd ok.npy --s x.npy --u x.npy", 2, "must name different files"},
      {"linalg qr ok.npy --q q.npy --device gpu", 2, "--device"},
      {"linalg qr absent.npy --q q.npy", 5, "covflow linalg qr: error: absent.npy: cannot open"},
      {"linalg svd absent.npy --s s.npy", 5, "covflow linalg svd: error: absent.npy: cannot open"},
      {"linalg qr ok.npy --q no/such/dir/q.npy", 5, "cannot create"},
      {"linalg qr flat.npy --q q.npy", 4, "expected (batch, m, n) or (m, n) matrices, got shape (6,) float64 (1 dimensions)"},
      {"linalg svd rank4.npy --s s.npy", 4, "(4 dimensions)"},
      {"linalg qr int.npy --r r.npy", 4, "int.npy: unsupported dtype '<i4' (int32) for a matrix"},
      {"linalg svd int.npy --s s.npy", 4, "int.npy: unsupported dtype '<i4' (int32)"},
      {"linalg qr short.npy --r r.npy", 4, "bytes follow the header"},
      {"linalg svd short.npy --s s.npy", 4, "bytes follow the header"},
      {"linalg svd magic.npy --s s.npy", 4, "magic.npy"},
      {"linalg qr many.npy --r r.npy", 4, "holds 2147483648 matrices, more than the 2147483647 a batch may hold"},
      {"linalg svd many.npy --s s.npy", 4, "holds 2147483648 matrices, more than the 2147483647 a batch may hold"},
      {"linalg rsvd ok.npy --s s.npy", 2, "give exactly one of --rank K (fixed rank) and --tol T (fixed accuracy)"},
      {"linalg rsvd ok.npy --rank 1 --tol 0.01 --s s.npy", 2, "give exactly one of --rank K (fixed rank) and --tol T"},
      {"linalg rsvd ok.npy --rank 1 --max-rank 2 --s s.npy", 2, "--max-rank goes with --tol"},
      {"linalg rsvd ok.npy --max-rank 2 --s s.npy", 2, "give exactly one of --rank K"},
      {"linalg rsvd sq.npy --rank 1 --hermitian --s s.npy --vh vh.npy", 2, "--vh does not go with --hermitian"},
      {"linalg rsvd ok.npy --rank 1", 2, "--s is required"},
      {"linalg rsvd ok.npy --rank 1 --s x.npy --ranks x.npy", 2, "must name different files"},
      {"linalg rsvd ok.npy --rank 0 --s s.npy", 2, "--rank must be at least 1, got 0"},
      {"linalg rsvd ok.npy --tol -1 --s s.npy", 2, "--tol must be a positive number, got -1"},
      {"linalg rsvd ok.npy --tol 0.1 --block 0 --s s.npy", 2, "--block must be at least 1, got 0"},
      // An option linalg refuses for this input: a tolerance below what float64 can confirm.
      {"linalg rsvd ok.npy --tol 1e-12 --s s.npy", 2, "covflow linalg rsvd: error: ok.npy (3, 2) float64: rsvd: tolerance"},
      {"linalg rsvd ok.npy --rank 1 --hermitian --s s.npy", 4, "ok.npy: --hermitian takes square matrices, got shape (3, 2) float64: 3×2"},
      {"linalg rsvd absent.npy --rank 1 --s s.npy", 5, "covflow linalg rsvd: error: absent.npy: cannot open"},
      {"linalg rsvd flat.npy --rank 1 --s s.npy", 4, "expected (batch, m, n) or (m, n) matrices"},
      {"linalg rsvd int.npy --rank 1 --s s.npy", 4, "int.npy: unsupported dtype '<i4' (int32)"},
      {"linalg rsvd ok.npy --rank 1 --s s.npy --ranks no/such/dir/r.npy", 5, "no/such/dir/r.npy: cannot create"},
  };
  for (const Case& c : cases) {
    const Outcome r = run(dir, covflow_cli + " " + c.args);
    EXPECT_EQ(r.code, c.code) << c.args << ": " << r.err;
    EXPECT_NE(r.err.find(c.phrase), std::string::npos) << c.args << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args << ": " << r.out;
  }
  for (const std::string sub : {" linalg qr", " linalg svd", " linalg rsvd"}) {
    const Outcome help = run(dir, covflow_cli + sub + " --help");
    EXPECT_EQ(help.code, 0) << sub;
    EXPECT_NE(help.out.find("numpy.linalg"), std::string::npos) << sub << help.out;
  }
  if (!linalg::probe_devices().available())
    for (const std::string args : {"linalg qr ok.npy --q q.npy --device cuda", "linalg svd ok.npy --s s.npy --device cuda",
                                   "linalg rsvd ok.npy --rank 1 --s s.npy --device cuda"}) {
      const Outcome cuda = run(dir, covflow_cli + " " + args);
      EXPECT_EQ(cuda.code, 6) << args << ": " << cuda.err;
      EXPECT_NE(cuda.err.find("--device cuda"), std::string::npos) << cuda.err;
    }
}

// ---- covflow linalg rsvd ----------------------------------------------------------------------
// Inputs of exactly known singular values — A = X·diag(σ)·Yᴴ with X, Y orthonormal (modified
// Gram–Schmidt, twice, on Gaussian columns: a QR) — so S, the ranks and the reconstruction are
// checked against exact values, not against another SVD. rsvd on an exactly low-rank matrix is a
// QR and an SVD of the range it samples: svd's tolerance, 10·max(m, n)·ε, holds for it too.

// Orthonormal columns, rows × cols, row-major; real when T is.
template <class T>
std::vector<cd> orthonormal_columns(std::size_t rows, std::size_t cols, std::mt19937_64& rng) {
  const auto gaussian = test::random_normal<T>(rows * cols, rng);
  std::vector<cd> q(gaussian.begin(), gaussian.end());
  for (std::size_t j = 0; j < cols; ++j) {
    for (int pass = 0; pass < 2; ++pass)
      for (std::size_t p = 0; p < j; ++p) {
        cd dot = 0;
        for (std::size_t i = 0; i < rows; ++i) dot += std::conj(q[i * cols + p]) * q[i * cols + j];
        for (std::size_t i = 0; i < rows; ++i) q[i * cols + j] -= dot * q[i * cols + p];
      }
    double norm = 0;
    for (std::size_t i = 0; i < rows; ++i) norm += std::norm(q[i * cols + j]);
    for (std::size_t i = 0; i < rows; ++i) q[i * cols + j] /= std::sqrt(norm);
  }
  return q;
}

template <class T> T from_cd(cd x) {
  if constexpr (linalg::is_complex_v<T>) return T(x);
  else return static_cast<T>(x.real());
}

// One m × n matrix per entry of `sigma` with exactly those singular values (descending), appended
// to `a` row-major. hermitian: Y = X (m = n), a positive semi-definite matrix with eigenvalues σ.
template <class T>
void append_with_values(std::vector<T>& a, std::size_t m, std::size_t n, const std::vector<double>& sigma,
                        bool hermitian, std::mt19937_64& rng) {
  const std::size_t k = sigma.size();
  const auto x = orthonormal_columns<T>(m, k, rng);
  const auto y = hermitian ? x : orthonormal_columns<T>(n, k, rng);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      cd acc = 0;
      for (std::size_t l = 0; l < k; ++l) acc += x[i * k + l] * sigma[l] * std::conj(y[j * k + l]);
      a.push_back(from_cd<T>(acc));
    }
}

// R.npy is int32: checked to be numpy.save's bytes for that shape (its header as numpy.save writes
// it for float32, with the descr changed: the same length).
std::vector<std::int32_t> load_ranks(const std::filesystem::path& file, const Shape& shape) {
  std::string header = io::npy_header(io::NpyDtype::float32, shape, false);
  header.replace(header.find("'<f4'"), 5, "'<i4'");
  std::size_t count = 1;
  for (std::uint64_t d : shape) count *= d;
  const auto bytes = test::read_bytes(file);
  EXPECT_EQ(bytes.size(), header.size() + count * sizeof(std::int32_t)) << file;
  if (bytes.size() != header.size() + count * sizeof(std::int32_t)) return {};
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(bytes.data()), header.size()), header) << file;
  std::vector<std::int32_t> ranks(count);
  std::memcpy(ranks.data(), bytes.data() + header.size(), count * sizeof(std::int32_t));
  return ranks;
}

// Matrix b's U·diag(S) (m × r), from U (…, m, r) and S (…, r).
std::vector<cd> scaled_columns(const std::vector<cd>& u, const std::vector<cd>& s, std::size_t b, std::size_t m,
                               std::size_t r) {
  std::vector<cd> us(u.begin() + b * m * r, u.begin() + (b + 1) * m * r);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < r; ++j) us[i * r + j] *= s[b * r + j];
  return us;
}

// A's matrix b as a row-major vector of complex doubles.
template <class T>
std::vector<cd> matrix_of(const std::vector<T>& a, std::size_t b, std::size_t m, std::size_t n) {
  return std::vector<cd>(a.begin() + b * m * n, a.begin() + (b + 1) * m * n);
}

// Fixed rank 5 on exactly rank-5 matrices, σ = s₀·(10, 3, 3 − 10⁻⁶, 1, 10⁻³) (a cluster and a small
// one): S within the tolerance of σ, A = U·diag(S)·Vh, UᴴU = I, Vh·Vhᴴ = I, ranks all 5.
template <class T>
void check_rsvd_fixed_rank(const test::ScratchDir& dir, std::size_t count, bool batched, std::size_t m, std::size_t n,
                           std::mt19937_64& rng) {
  constexpr std::size_t rank = 5;
  const double tolerance = 10.0 * std::max(m, n) * test::eps<T>();
  const std::string type(io::numpy_name(dtype_of<T>())), real(io::numpy_name(io::real_dtype(dtype_of<T>())));
  const Shape shape = batched ? Shape{count, m, n} : Shape{m, n};
  SCOPED_TRACE("rsvd --rank 5 " + type + " " + shape_text(shape));
  std::vector<T> a;
  std::vector<std::vector<double>> sigma;
  for (std::size_t b = 0; b < count; ++b) {
    const double scale = 1.0 + b;
    sigma.push_back({10 * scale, 3 * scale, (3 - 1e-6) * scale, scale, 1e-3 * scale});
    append_with_values(a, m, n, sigma.back(), false, rng);
  }
  save_npy(dir / "a.npy", shape, a);
  const Outcome r = run(dir, covflow_cli + " linalg rsvd a.npy --rank 5 --s s.npy --u u.npy --vh vh.npy --ranks ranks.npy --device cpu");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  const Shape s_shape = batched ? Shape{count, rank} : Shape{rank};
  const Shape u_shape = batched ? Shape{count, m, rank} : Shape{m, rank};
  const Shape vh_shape = batched ? Shape{count, rank, n} : Shape{rank, n};
  const Shape ranks_shape = batched ? Shape{count} : Shape{};
  const std::string matrices = batched ? std::to_string(count) + " matrices " : std::string("one matrix ");
  EXPECT_EQ(r.out, "rsvd: " + matrices + std::to_string(m) + "×" + std::to_string(n) + " " + type + " on cpu, rank 5: wrote s.npy " +
                       shape_text(s_shape) + " " + real + ", u.npy " + shape_text(u_shape) + " " + type + ", vh.npy " +
                       shape_text(vh_shape) + " " + type + " and ranks.npy " + shape_text(ranks_shape) + " int32\n");
  const auto s = load_npy(dir / "s.npy", s_shape, io::real_dtype(dtype_of<T>()));
  const auto u = load_npy(dir / "u.npy", u_shape, dtype_of<T>());
  const auto vh = load_npy(dir / "vh.npy", vh_shape, dtype_of<T>());
  EXPECT_EQ(load_ranks(dir / "ranks.npy", ranks_shape), std::vector<std::int32_t>(count, rank));
  for (std::size_t b = 0; b < count; ++b) {
    for (std::size_t j = 0; j < rank; ++j)
      EXPECT_NEAR(s[b * rank + j].real(), sigma[b][j], tolerance * sigma[b][0]) << "S[" << j << "], matrix " << b;
    const std::vector<cd> ab = matrix_of(a, b, m, n), us = scaled_columns(u, s, b, m, rank);
    EXPECT_LE(product_error(matrix(us, 0, m, rank), false, matrix(vh, b, rank, n), false, ab),
              tolerance * frobenius(matrix(ab, 0, m, n)))
        << "U·diag(S)·Vh = A, matrix " << b;
    EXPECT_LE(product_error(matrix(u, b, m, rank), true, matrix(u, b, m, rank), false, identity(rank)), tolerance)
        << "UᴴU = I, matrix " << b;
    EXPECT_LE(product_error(matrix(vh, b, rank, n), false, matrix(vh, b, rank, n), true, identity(rank)), tolerance)
        << "Vh·Vhᴴ = I, matrix " << b;
  }
}

TEST(CliLinalg, RsvdFixedRankRecoversTheSingularValuesOfExactlyLowRankMatrices) {
  test::ScratchDir dir;
  std::mt19937_64 rng(test::fresh_seed("covflow linalg rsvd --rank"));
  check_rsvd_fixed_rank<double>(dir, 3, true, 40, 30, rng);
  check_rsvd_fixed_rank<double>(dir, 1, false, 30, 40, rng);
  check_rsvd_fixed_rank<linalg::cf64>(dir, 3, true, 40, 30, rng);
  check_rsvd_fixed_rank<linalg::cf64>(dir, 1, false, 30, 40, rng);
}

// --tol 1e-6 (linalg refuses less than 10·√ε, 1.5e-7 in double) on matrices of exact ranks 3, 7, 1
// and 12, σ = 1 on each so that the rank is clear-cut: ranks.npy holds them, S is 1 up to each rank
// and exactly 0 beyond, U's columns and Vh's rows beyond it are zero, and ‖A − U·diag(S)·Vh‖_F is
// within the tolerance. With --max-rank 5 the rank-7 and rank-12 ones stop at 5, which a note on
// stdout names; that is no failure.
template <class T>
void check_rsvd_tolerance(const test::ScratchDir& dir, std::mt19937_64& rng) {
  constexpr std::size_t count = 4, m = 40, n = 30, r = 30;
  const std::vector<std::int32_t> exact_ranks{3, 7, 1, 12};
  const double tolerance = 10.0 * std::max(m, n) * test::eps<T>();
  const std::string type(io::numpy_name(dtype_of<T>())), real(io::numpy_name(io::real_dtype(dtype_of<T>())));
  SCOPED_TRACE("rsvd --tol " + type);
  std::vector<T> a;
  for (std::int32_t rank : exact_ranks) append_with_values(a, m, n, std::vector<double>(rank, 1.0), false, rng);
  save_npy(dir / "a.npy", {count, m, n}, a);

  const Outcome fixed_accuracy = run(
      dir, covflow_cli + " linalg rsvd a.npy --tol 1e-6 --block 4 --s s.npy --u u.npy --vh vh.npy --ranks ranks.npy --device cpu");
  ASSERT_EQ(fixed_accuracy.code, 0) << fixed_accuracy.err;
  EXPECT_TRUE(fixed_accuracy.err.empty()) << fixed_accuracy.err;
  EXPECT_EQ(fixed_accuracy.out, "rsvd: 4 matrices 40×30 " + type + " on cpu, ranks 1–12 at --tol 1e-06: wrote s.npy (4, 30) " +
                                    real + ", u.npy (4, 40, 30) " + type + ", vh.npy (4, 30, 30) " + type +
                                    " and ranks.npy (4,) int32\n");
  const auto s = load_npy(dir / "s.npy", {count, r}, io::real_dtype(dtype_of<T>()));
  const auto u = load_npy(dir / "u.npy", {count, m, r}, dtype_of<T>());
  const auto vh = load_npy(dir / "vh.npy", {count, r, n}, dtype_of<T>());
  EXPECT_EQ(load_ranks(dir / "ranks.npy", {count}), exact_ranks);
  for (std::size_t b = 0; b < count; ++b) {
    const auto rank = static_cast<std::size_t>(exact_ranks[b]);
    for (std::size_t j = 0; j < r; ++j) {
      if (j < rank) {
        EXPECT_NEAR(s[b * r + j].real(), 1.0, tolerance) << "S[" << j << "], matrix " << b;
      } else {
        EXPECT_EQ(s[b * r + j], cd(0)) << "S[" << j << "] beyond the rank, matrix " << b;
      }
    }
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = rank; j < r; ++j) EXPECT_EQ(u[(b * m + i) * r + j], cd(0)) << "U beyond the rank, matrix " << b;
    for (std::size_t i = rank; i < r; ++i)
      for (std::size_t j = 0; j < n; ++j) EXPECT_EQ(vh[(b * r + i) * n + j], cd(0)) << "Vh beyond the rank, matrix " << b;
    const std::vector<cd> ab = matrix_of(a, b, m, n), us = scaled_columns(u, s, b, m, r);
    EXPECT_LE(product_error(matrix(us, 0, m, r), false, matrix(vh, b, r, n), false, ab), 1e-6 * frobenius(matrix(ab, 0, m, n)))
        << "‖A − U·diag(S)·Vh‖_F within --tol, matrix " << b;
  }

  const Outcome capped = run(dir, covflow_cli + " linalg rsvd a.npy --tol 1e-6 --max-rank 5 --block 4 --s s5.npy --ranks ranks5.npy --device cpu");
  ASSERT_EQ(capped.code, 0) << capped.err;
  EXPECT_TRUE(capped.err.empty()) << capped.err;
  EXPECT_EQ(capped.out, "rsvd: 4 matrices 40×30 " + type + " on cpu, ranks 1–5 at --tol 1e-06: wrote s5.npy (4, 5) " + real +
                            " and ranks5.npy (4,) int32\n"
                            "rsvd: matrices 1, 3 reached --max-rank 5 before --tol 1e-06\n");
  EXPECT_EQ(load_ranks(dir / "ranks5.npy", {count}), (std::vector<std::int32_t>{3, 5, 1, 5}));
  const auto s5 = load_npy(dir / "s5.npy", {count, 5}, io::real_dtype(dtype_of<T>()));
  for (std::size_t j = 0; j < 5; ++j) EXPECT_NEAR(s5[1 * 5 + j].real(), 1.0, tolerance) << "S[" << j << "], matrix 1";
}

TEST(CliLinalg, RsvdToleranceFindsEachMatrixsExactRank) {
  test::ScratchDir dir;
  std::mt19937_64 rng(test::fresh_seed("covflow linalg rsvd --tol"));
  check_rsvd_tolerance<double>(dir, rng);
  check_rsvd_tolerance<linalg::cf64>(dir, rng);
}

// --hermitian on positive semi-definite matrices of rank 4, λ = s₀·(4, 3, 2, 1): S = λ, U the
// eigenvectors (A = U·diag(S)·Uᴴ, UᴴU = I), by --rank and by --tol; a non-square input is refused.
template <class T>
void check_rsvd_hermitian(const test::ScratchDir& dir, std::size_t count, bool batched, std::mt19937_64& rng) {
  constexpr std::size_t n = 30, rank = 4;
  const double tolerance = 10.0 * n * test::eps<T>();
  const std::string type(io::numpy_name(dtype_of<T>())), real(io::numpy_name(io::real_dtype(dtype_of<T>())));
  const Shape shape = batched ? Shape{count, n, n} : Shape{n, n};
  SCOPED_TRACE("rsvd --hermitian " + type + " " + shape_text(shape));
  std::vector<T> a;
  std::vector<std::vector<double>> lambda;
  for (std::size_t b = 0; b < count; ++b) {
    const double scale = 1.0 + b;
    lambda.push_back({4 * scale, 3 * scale, 2 * scale, scale});
    append_with_values(a, n, n, lambda.back(), true, rng);
  }
  save_npy(dir / "a.npy", shape, a);
  const std::string matrices = batched ? std::to_string(count) + " matrices " : std::string("one matrix ");
  for (const std::string mode : {"--rank 4", "--tol 1e-6"}) {
    SCOPED_TRACE(mode);
    const bool by_rank = mode == "--rank 4";
    const std::size_t r = by_rank ? rank : n;
    const Outcome result = run(dir, covflow_cli + " linalg rsvd a.npy --hermitian " + mode + " --s s.npy --u u.npy --ranks ranks.npy --device cpu");
    ASSERT_EQ(result.code, 0) << result.err;
    EXPECT_TRUE(result.err.empty()) << result.err;
    const Shape s_shape = batched ? Shape{count, r} : Shape{r}, u_shape = batched ? Shape{count, n, r} : Shape{n, r};
    const Shape ranks_shape = batched ? Shape{count} : Shape{};
    EXPECT_EQ(result.out, "rsvd: " + matrices + "30×30 " + type + " on cpu, Hermitian, rank 4" +
                              (by_rank ? std::string() : std::string(" at --tol 1e-06")) + ": wrote s.npy " +
                              shape_text(s_shape) + " " + real + ", u.npy " + shape_text(u_shape) + " " + type +
                              " and ranks.npy " + shape_text(ranks_shape) + " int32\n");
    const auto s = load_npy(dir / "s.npy", s_shape, io::real_dtype(dtype_of<T>()));
    const auto u = load_npy(dir / "u.npy", u_shape, dtype_of<T>());
    EXPECT_EQ(load_ranks(dir / "ranks.npy", ranks_shape), std::vector<std::int32_t>(count, rank));
    for (std::size_t b = 0; b < count; ++b) {
      for (std::size_t j = 0; j < r; ++j)
        EXPECT_NEAR(s[b * r + j].real(), j < rank ? lambda[b][j] : 0.0, tolerance * lambda[b][0]) << "λ[" << j << "], matrix " << b;
      const std::vector<cd> ab = matrix_of(a, b, n, n), us = scaled_columns(u, s, b, n, r);
      EXPECT_LE(product_error(matrix(us, 0, n, r), false, matrix(u, b, n, r), true, ab), tolerance * frobenius(matrix(ab, 0, n, n)))
          << "U·diag(S)·Uᴴ = A, matrix " << b;
      const std::vector<cd> ub(u.begin() + b * n * r, u.begin() + (b + 1) * n * r);
      std::vector<cd> leading(n * rank);  // the eigenvectors of the nonzero eigenvalues
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < rank; ++j) leading[i * rank + j] = ub[i * r + j];
      EXPECT_LE(product_error(matrix(leading, 0, n, rank), true, matrix(leading, 0, n, rank), false, identity(rank)), tolerance)
          << "UᴴU = I, matrix " << b;
    }
  }
}

TEST(CliLinalg, RsvdHermitianGivesTheEigenpairsOfPositiveSemiDefiniteMatrices) {
  test::ScratchDir dir;
  std::mt19937_64 rng(test::fresh_seed("covflow linalg rsvd --hermitian"));
  check_rsvd_hermitian<linalg::cf64>(dir, 2, true, rng);
  check_rsvd_hermitian<double>(dir, 1, false, rng);
}

// A matrix with a NaN: NaN in S, U and Vh, rank -1, named on stderr as svd names it, exit code 7;
// the others are right.
TEST(CliLinalg, RsvdNamesANonFiniteMatrixWritesItAsNanAndExitsSeven) {
  test::ScratchDir dir;
  std::mt19937_64 rng(test::fresh_seed("covflow linalg rsvd non-finite"));
  std::vector<linalg::cf64> a;
  for (int b = 0; b < 3; ++b) append_with_values(a, 20, 15, {3.0, 2.0, 1.0}, false, rng);
  a[1 * 300 + 7] = linalg::cf64(std::numeric_limits<double>::quiet_NaN(), 0.0);
  save_npy(dir / "a.npy", {3, 20, 15}, a);
  const Outcome r = run(dir, covflow_cli + " linalg rsvd a.npy --rank 3 --s s.npy --u u.npy --vh vh.npy --ranks ranks.npy --device cpu");
  EXPECT_EQ(r.code, 7) << r.err;
  EXPECT_EQ(r.err, "covflow linalg rsvd: a.npy: 1 of 3 matrices failed, written as NaN in s.npy, u.npy and vh.npy "
                   "(rank -1 in ranks.npy): matrix 1 (NaN or Inf in the matrix)\n");
  const auto s = load_npy(dir / "s.npy", {3, 3}, io::NpyDtype::float64);
  const auto u = load_npy(dir / "u.npy", {3, 20, 3}, io::NpyDtype::complex128);
  EXPECT_EQ(load_ranks(dir / "ranks.npy", {3}), (std::vector<std::int32_t>{3, -1, 3}));
  for (std::size_t i = 3; i < 6; ++i) EXPECT_TRUE(std::isnan(s[i].real())) << i;
  for (std::size_t i = 60; i < 120; ++i) EXPECT_TRUE(std::isnan(u[i].real())) << i;
  for (std::size_t b : {0u, 2u})
    for (std::size_t j = 0; j < 3; ++j) EXPECT_NEAR(s[b * 3 + j].real(), 3.0 - j, 1e-12) << "S[" << j << "], matrix " << b;
}

}  // namespace
}  // namespace covflow
