// check_my_softmax.cpp -- an outside project checks its own softmax kernel against ladder.
//
// ladder's case contract for 01-softmax gives the fp64 expected output of OUR inputs (our shape, our
// masking) and judges our float output by the tolerance rule; the registry gives a CUDA rung of the
// same stage (run on the CPU through SIMT) to show a second candidate through the same check.
// Exit code 0 when every candidate passes, 1 otherwise.
#include <cmath>
#include <cstdio>
#include <limits>

#include "ladder/core/contract.hpp"
#include "ladder/core/registry.hpp"
#include "ladder/01-softmax/softmax.hpp"

void my_softmax(const float* x, float* y, int64_t rows, int64_t cols);  // my_softmax.cpp

int main() {
  // Our shape: 37 rows of 1000 logits, every 7th masked, row 5 fully masked, row 9 with huge logits.
  ladder::Array<float> x({37, 1000});
  for (int64_t i = 0; i < x.size(); ++i) {
    const int64_t r = i / 1000;
    x.data[i] = (i % 7 == 0 || r == 5) ? -std::numeric_limits<float>::infinity()
                                       : static_cast<float>(8 * std::sin(0.37 * static_cast<double>(i)));
    if (r == 9) x.data[i] += 10000.0f;
  }
  const ladder::Contract& c = ladder::contract("01-softmax");
  const ladder::Tensors inputs{{"x", ladder::to_npy(x)}};
  const ladder::Tensors expected = ladder::run_oracle(c, inputs, nlohmann::json::object());

  bool ok = true;
  auto judge = [&](const char* who, const ladder::Array<float>& y) {
    const ladder::CheckReport rep =
        ladder::check(c, inputs, nlohmann::json::object(), expected, "y", ladder::to_npy(y));
    std::printf("%s: %s\n", who, rep.text.c_str());
    ok = ok && rep.pass;
  };

  ladder::Array<float> mine(x.shape);
  my_softmax(x.data.data(), mine.data.data(), x.rows(), x.cols());
  judge("my_softmax", mine);

  const ladder::Rung& cuda = ladder::registry().find("01-softmax", "cuda", "v3_online");
  ladder::Array<float> theirs(x.shape);
  cuda.fn<ladder::softmax::RowsFns>().f32(x.data.data(), theirs.data.data(), x.rows(), x.cols());
  judge("ladder cuda/v3_online (SIMT)", theirs);
  return ok ? 0 : 1;
}
