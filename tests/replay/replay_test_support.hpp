// Helpers for the replay tests: a scratch directory, whole-file I/O, random frames.
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <span>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "covflow/replay/frame.hpp"
#include "covflow/replay/reader.hpp"
#include "covflow/replay/writer.hpp"

namespace covflow::test {

// A fresh directory under the system's temporary directory, removed with its contents.
class ScratchDir {
 public:
  ScratchDir() {
    std::random_device device;
    path_ = std::filesystem::temp_directory_path() / ("covflow-test-" + std::to_string(device()) + std::to_string(device()));
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline std::vector<std::byte> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(chars.size());
  for (std::size_t i = 0; i < chars.size(); ++i) out[i] = std::byte(static_cast<unsigned char>(chars[i]));
  return out;
}

inline void write_bytes(const std::filesystem::path& path, std::span<const std::byte> data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

// A frame of the given kind and type with small random dimensions and random payload bytes that
// are finite numbers (so a test can print them).
inline replay::Frame random_frame(std::mt19937_64& rng, std::uint64_t sequence, replay::PayloadKind kind,
                                  replay::ElementType type, std::uint32_t max_dim = 6) {
  std::uniform_int_distribution<std::uint32_t> dim(1, max_dim);
  replay::FrameHeader h;
  h.sequence = sequence;
  h.capture_time_ns = std::int64_t(sequence) * 10'000'000 + std::int64_t(rng() % 1000);
  h.kind = kind;
  h.element_type = type;
  h.rows = dim(rng);
  h.cols = kind == replay::PayloadKind::covariance ? h.rows : dim(rng);
  h.count = dim(rng);
  std::normal_distribution<double> normal;
  replay::Frame frame{h, std::vector<std::byte>(h.payload_bytes())};
  const std::size_t reals = h.payload_bytes() / (type == replay::ElementType::f32 || type == replay::ElementType::cf32 ? 4 : 8);
  for (std::size_t i = 0; i < reals; ++i) {
    if (type == replay::ElementType::f32 || type == replay::ElementType::cf32) {
      const float v = static_cast<float>(normal(rng));
      std::memcpy(frame.payload.data() + 4 * i, &v, 4);
    } else {
      const double v = normal(rng);
      std::memcpy(frame.payload.data() + 8 * i, &v, 8);
    }
  }
  return frame;
}

inline constexpr replay::ElementType all_element_types[] = {replay::ElementType::f32, replay::ElementType::f64,
                                                            replay::ElementType::cf32, replay::ElementType::cf64};
inline constexpr replay::PayloadKind all_payload_kinds[] = {replay::PayloadKind::covariance, replay::PayloadKind::snapshots};

// Every frame the reader returns, in order.
inline std::vector<replay::Frame> read_all(replay::Reader& reader) {
  std::vector<replay::Frame> frames;
  while (auto frame = reader.next()) frames.push_back(std::move(*frame));
  return frames;
}

inline std::string damage_text(const replay::Reader& reader) {
  std::string out;
  for (const auto& d : reader.damage()) out += "\n  " + d.message();
  return out.empty() ? " (none)" : out;
}

}  // namespace covflow::test
