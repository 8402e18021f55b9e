// `covflow linalg compress | expand | apply | solve C.npz --device cuda`: the device paths of the
// TLR commands (the input or the archive's storage uploaded, linalg::tlr_* on the GPU, the result
// downloaded) through the same checks as the CPU test (tlr_cli_checks.hpp): the archive's layout,
// the reconstruction within the tolerance, products and solves against the dense matrix. Skips
// without a GPU.
#include "tlr_cli_checks.hpp"

namespace covflow::test {
namespace {

using namespace tlr_cli;

template <class T>
class TlrCliGpu : public GpuTest {};
using ElementTypes = ::testing::Types<float, double, std::complex<float>, std::complex<double>>;
TYPED_TEST_SUITE(TlrCliGpu, ElementTypes);

TYPED_TEST(TlrCliGpu, CompressExpandOnCudaMeetsTheToleranceAndTheLayout) {
  check_compress_expand<TypeParam>(cli::DeviceChoice::cuda);
}
TYPED_TEST(TlrCliGpu, ApplyAndSolveOnCudaMatchTheDenseMatrix) { check_apply_solve<TypeParam>(cli::DeviceChoice::cuda); }

}  // namespace
}  // namespace covflow::test
