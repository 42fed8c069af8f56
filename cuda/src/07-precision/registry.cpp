// cuda/src/07-precision/registry.cpp -- the stage-07 CUDA rungs in the registry (backend "cuda"): a8w8, the
// A8W8 recipe on the device (precision::RecipeFns with its own run, float32 only): x quantised per token and
// w per channel by the int8 quantise kernels, acc = xq wq through the __dp4a GEMM, y dequantised in its
// epilogue. Its outputs are the reference rung's (xq, xs, acc, y), judged by the same contract: codes, scales
// and acc exactly, y by the bound derived in ladder/07-precision/a8w8.hpp. And fp8_block, DeepSeek-V3's FP8
// block-scaled GEMM (the reference rung's recipe, its params acc_bits, acc_round, nc, x_scale): x quantised to
// E4M3 in 1 x 128 tiles (or with the static x_scale) and w in 128 x 128 blocks by the E4M3 quantise kernels, y
// on the tensor cores (mma.sync m16n8k32 e4m3, promoted every nc; cuda/src/07-precision/fp8_mma.cuh); outputs
// xq, xs exactly and y by fp8_bound (fp8_block.hpp), which covers the kernel's accumulation for every recipe:
// fp8_mma.cuh says why. Cost: the reference formula.
// bf16_gemm: the bf16 GEMM recipe (ladder/07-precision/bf16_gemm.hpp) on the tensor-core kernel bf16_gemm
// (cuda/src/07-precision/bf16_gemm.cuh): x, w rounded to bf16 RNE on the host (formats::to_bf16, the reference's
// codes: xq, wq are those), w's codes transposed to [N, K'] and both padded with zero codes to K' = K rounded up to
// 8 (the kernel's 16-byte rows; a zero code adds an exact 0). Under SIMT each output is a chain of float32 RNE
// additions of its exact products (cuda/simt's emulated mma), inside the recipe's bound; a device's mma is not
// (bf16_gemm.hpp says how far).
// attn_bf16: the bf16 attention recipe run by stage 02's tensor-core forward tiled_bf16 (attn_bf16_rung.cpp says
// why its arithmetic is inside the recipe's bound), judged as the reference rung: o and lse by that bound.
#include <cmath>

#include "ladder/07-precision/recipe.hpp"
#include "ladder/07-precision/recipe_cost.hpp"
#include "ladder/core/registry.hpp"
#include "ladder/cuda/07-precision/attn_bf16.hpp"
#include "ladder/cuda/07-precision/precision.hpp"
#include "ladder/cuda/device.hpp"

namespace ladder::cuda {
namespace {
using ladder::precision::attn_cost, ladder::precision::bf16_cost, ladder::precision::gemm_cost;  // recipe_cost.hpp

Tensors a8w8_rung(const ladder::precision::Recipe& r, const Mat<float>& x, const Mat<float>& w) {
  require(r.name == "a8w8", "cuda 07-precision/a8w8: params.recipe = {} violates recipe == a8w8", r.name);
  require(x.cols() == w.rows(), "cuda 07-precision/a8w8: x.cols = {} violates x.cols == w.rows = {}", x.cols(), w.rows());
  // The reference refuses non-finite inputs naming the element (quant::quantize); the kernels do not look.
  for (const Mat<float>* m : {&x, &w})
    for (int64_t i = 0; i < m->size(); ++i)
      require(std::isfinite(m->data()[i]), "cuda 07-precision/a8w8: input {} element {} = {} violates isfinite",
              m == &x ? "x" : "w", i, m->data()[i]);
  const int64_t M = x.rows(), K = x.cols(), N = w.cols();
  const auto n = [](int64_t v) { return static_cast<size_t>(v); };
  DeviceBuffer<float> dx(x.data(), n(M * K)), dw(w.data(), n(K * N)), xs(n(M)), ws(n(N)), y(n(M * N));
  DeviceBuffer<int8_t> xq(n(M * K)), wq(n(K * N));
  DeviceBuffer<int32_t> acc(n(M * N));
  precision::quantize_per_token_int8(dx.data(), M, K, xq.data(), xs.data());
  precision::quantize_per_channel_int8(dw.data(), K, N, wq.data(), ws.data());
  precision::a8w8_gemm(xq.data(), xs.data(), wq.data(), ws.data(), M, K, N, acc.data(), y.data());
  sync();
  Array<int32_t> codes({M, K}), a({M, N});
  Array<float> scales({M, 1}), out({M, N});
  const std::vector<int8_t> q = xq.to_host();
  codes.data.assign(q.begin(), q.end());
  scales.data = xs.to_host();
  a.data = acc.to_host();
  out.data = y.to_host();
  return Tensors{{"xq", to_npy(codes)}, {"xs", to_npy(scales)}, {"acc", to_npy(a)}, {"y", to_npy(out)}};
}

// The inputs' finiteness, as the reference's quant::quantize refuses NaN / inf naming the element.
void require_finite(const char* rung, const Mat<float>& x, const Mat<float>& w) {
  for (const Mat<float>* m : {&x, &w})
    for (int64_t i = 0; i < m->size(); ++i)
      require(std::isfinite(m->data()[i]), "cuda 07-precision/{}: input {} element {} = {} violates isfinite", rung,
              m == &x ? "x" : "w", i, m->data()[i]);
}

Tensors fp8_block_rung(const ladder::precision::Recipe& r, const Mat<float>& x, const Mat<float>& w) {
  require(r.name == "fp8_block", "cuda 07-precision/fp8_block: params.recipe = {} violates recipe == fp8_block",
          r.name);
  require(x.cols() == w.rows(), "cuda 07-precision/fp8_block: x.cols = {} violates x.cols == w.rows = {}", x.cols(),
          w.rows());
  require_finite("fp8_block", x, w);
  ladder::precision::check_recipe(r.fp8);
  const int64_t M = x.rows(), K = x.cols(), N = w.cols(), kb = (K + 127) / 128, nb = (N + 127) / 128;
  const auto n = [](int64_t v) { return static_cast<size_t>(v); };
  DeviceBuffer<float> dx(x.data(), n(M * K)), dw(w.data(), n(K * N)), xs(n(M * kb)), ws(n(kb * nb)), y(n(M * N));
  DeviceBuffer<uint8_t> xq(n(M * K)), wq(n(K * N));
  if (r.fp8.x_scale == 0)
    precision::quantize_e4m3_1x128(dx.data(), M, K, xq.data(), xs.data());
  else
    precision::quantize_e4m3_static(dx.data(), M, K, r.fp8.x_scale, xq.data(), xs.data());
  precision::quantize_e4m3_128x128(dw.data(), K, N, wq.data(), ws.data());
  precision::fp8_block_gemm(xq.data(), xs.data(), wq.data(), ws.data(), M, K, N, r.fp8.nc, y.data());
  sync();
  Array<int32_t> codes({M, K});
  Array<float> scales({M, kb}), out({M, N});
  const std::vector<uint8_t> q = xq.to_host();
  codes.data.assign(q.begin(), q.end());  // the E4M3 bits, 0..255, as the reference's codes_i32
  scales.data = xs.to_host();
  out.data = y.to_host();
  return Tensors{{"xq", to_npy(codes)}, {"xs", to_npy(scales)}, {"y", to_npy(out)}};
}

Tensors bf16_gemm_rung(const ladder::precision::Recipe& r, const Mat<float>& x, const Mat<float>& w) {
  require(r.name == "bf16_gemm", "cuda 07-precision/bf16_gemm: params.recipe = {} violates recipe == bf16_gemm",
          r.name);
  require(x.cols() == w.rows(), "cuda 07-precision/bf16_gemm: x.cols = {} violates x.cols == w.rows = {}", x.cols(),
          w.rows());
  const int64_t M = x.rows(), K = x.cols(), N = w.cols(), Kp = (K + 7) / 8 * 8;
  const std::vector<uint16_t> xq = ladder::precision::bf16_codes(x, "x"), wq = ladder::precision::bf16_codes(w, "w");
  const auto n = [](int64_t v) { return static_cast<size_t>(v); };
  std::vector<uint16_t> a(n(M * Kp), 0), b(n(N * Kp), 0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) a[n(i * Kp + k)] = xq[n(i * K + k)];
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j) b[n(j * Kp + k)] = wq[n(k * N + j)];
  DeviceBuffer<uint16_t> da(a), db(b);
  DeviceBuffer<float> y(n(M * N));
  precision::bf16_gemm(da.data(), db.data(), M, N, Kp, y.data());
  sync();
  Array<float> out({M, N});
  out.data = y.to_host();
  return Tensors{{"xq", to_npy(ladder::precision::bf16_codes_i32(xq, M, K))},
                 {"wq", to_npy(ladder::precision::bf16_codes_i32(wq, K, N))},
                 {"y", to_npy(out)}};
}

}  // namespace

// Called by the list CMake generates from the folders cuda/src/NN-stage/ (cuda/CMakeLists.txt).
void rungs_07_precision(Registry& r) {
  r.add({"07-precision", "a8w8", "A8W8 GEMM kernels: int8 quantise, __dp4a GEMM, dequant epilogue",
         "per-token / per-channel int8 quantise kernels (block amax reductions), int8 x int8 -> int32 with __dp4a "
         "(4 k per instruction, 16 x 16 tiles), y = acc * xs * ws in the epilogue",
         "cuda", ladder::precision::RecipeFns{"a8w8", &a8w8_rung}, &gemm_cost,
         "2 M K N integer ops; 1 byte per code read, 4 per output written"});
  r.add({"07-precision", "fp8_block", "FP8 block-scaled GEMM on tensor cores with promotion (DeepSeek-V3)",
         "E4M3 quantise kernels (1 x 128 tiles, 128 x 128 blocks, amax / 448), mma.sync m16n8k32 e4m3 into a zeroed "
         "fp32 fragment per nc-chunk, promoted into fp32 registers with the two scales (DeepGEMM's scheme)",
         "cuda", ladder::precision::RecipeFns{"fp8_block", &fp8_block_rung}, &gemm_cost,
         "2 M K N flops; 1 byte per code read, 4 per output written"});
  r.add({"07-precision", "bf16_gemm", "bf16 GEMM on tensor cores, float32 accumulation (MLA's projections)",
         "x, w rounded to bf16 RNE, mma.sync m16n8k16 bf16 -> fp32 on 128 x 128 tiles, ldmatrix.x4, a 3-stage "
         "cp.async ring (bf16_gemm.cuh); K padded with zero codes to a multiple of 8",
         "cuda", ladder::precision::RecipeFns{"bf16_gemm", &bf16_gemm_rung}, &bf16_cost,
         "2 M K N flops; 2 bytes per code read, 4 per output written"});
  r.add({"07-precision", "attn_bf16", "bf16 attention forward on tensor cores (stage 02's tiled_bf16, FA2's order)",
         "Q, K, V bf16 RNE, mma.sync m16n8k16 bf16 -> fp32 for S and P V, online softmax over tiles of 64 keys "
         "(bc with more keys per tile refused), P rounded to bf16 before P V; head dims padded to 64 or 128",
         "cuda", ladder::precision::RecipeFns{"attn_bf16", nullptr, &precision::attn_bf16_rung}, &attn_cost,
         "2 Lq Lk (d + dv) flops; 2 bytes per value read"});
}

}  // namespace ladder::cuda
