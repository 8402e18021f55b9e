// examples/write_frames.py, a writer that knows the format only from docs/frame-format.md,
// writes a file that covflow's reader reads whole, value for value.
#include <gtest/gtest.h>

#include <cstdlib>

#include "covflow/replay/reader.hpp"
#include "replay_test_support.hpp"

namespace covflow::replay {
namespace {

template <class T>
void expect_values(const Frame& frame, std::uint64_t i) {
  const auto values = payload_as<T>(frame);
  ASSERT_EQ(values.size(), frame.header.element_count());
  for (std::size_t j = 0; j < values.size(); ++j) {
    const double real = double(i) + double(j) / 8;  // exact in binary32 for these sizes
    if constexpr (std::is_floating_point_v<T>) {
      EXPECT_EQ(values[j], T(real)) << "frame " << i << " element " << j;
    } else {
      EXPECT_EQ(values[j], T(typename T::value_type(real), typename T::value_type(-double(j)))) << "frame " << i << " element " << j;
    }
  }
}

TEST(ReplayPythonWriter, FileWrittenFromTheDocumentReadsBack) {
  if (std::system("test -x /usr/bin/python3") != 0) GTEST_SKIP() << "/usr/bin/python3 is not installed";
  if (std::system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") != 0) GTEST_SKIP() << "numpy is not installed for /usr/bin/python3";
  test::ScratchDir dir;
  const std::string command = "/usr/bin/python3 " COVFLOW_SOURCE_DIR "/examples/write_frames.py '" + (dir / "py.cvf").string() + "' --frames 12";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;

  Reader reader(dir / "py.cvf");
  ASSERT_TRUE(reader.index().has_value()) << test::damage_text(reader);
  EXPECT_EQ(reader.index()->size(), 12u);
  const ElementType types[] = {ElementType::f32, ElementType::f64, ElementType::cf32, ElementType::cf64};
  for (std::uint64_t i = 0; i < 12; ++i) {
    const auto frame = reader.next();
    ASSERT_TRUE(frame.has_value()) << "frame " << i << test::damage_text(reader);
    const FrameHeader& h = frame->header;
    EXPECT_EQ(h.sequence, 100 + i);
    EXPECT_EQ(h.capture_time_ns, std::int64_t(i) * 10'000'000);
    EXPECT_EQ(h.kind, i % 2 == 0 ? PayloadKind::covariance : PayloadKind::snapshots);
    EXPECT_EQ(h.element_type, types[(i / 2) % 4]);
    EXPECT_EQ(h.rows, 3u);
    EXPECT_EQ(h.cols, i % 2 == 0 ? 3u : 5u);
    EXPECT_EQ(h.count, 2u);
    switch (h.element_type) {
      case ElementType::f32: expect_values<float>(*frame, i); break;
      case ElementType::f64: expect_values<double>(*frame, i); break;
      case ElementType::cf32: expect_values<std::complex<float>>(*frame, i); break;
      case ElementType::cf64: expect_values<std::complex<double>>(*frame, i); break;
    }
  }
  EXPECT_FALSE(reader.next().has_value());
  EXPECT_TRUE(reader.damage().empty()) << test::damage_text(reader);
}

}  // namespace
}  // namespace covflow::replay
