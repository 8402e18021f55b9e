// libFuzzer target for the frame file reader and the single-record decoder. Build: the
// replay_fuzz target (clang only). Run: replay_fuzz WORK_DIR tests/replay/corpus -max_total_time=600
// (new inputs go to WORK_DIR; the committed corpus stays as it is).
#include <cstddef>
#include <cstdint>

#include "reader_fuzz_body.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  covflow::fuzz::reader_fuzz_one({reinterpret_cast<const std::byte*>(data), size});
  return 0;
}
