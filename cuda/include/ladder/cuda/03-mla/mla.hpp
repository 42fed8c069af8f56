// ladder/cuda/03-mla/mla.hpp -- host API of the stage-03 CUDA rungs (cuda/src/03-mla/*.cu).
//
// Every pointer is a DEVICE pointer (ladder::cuda::DeviceBuffer<T>::data()); layouts are those of the
// references (ladder/03-mla/mla.hpp): weights nn.Linear [out, in], caches as mla::Prepared holds them, all
// float32, row-major. Each function launches its kernels and returns; call ladder::cuda::sync() before
// reading results on a GPU (under SIMT the kernels have finished when the function returns). Bad sizes
// throw ladder::Error naming the parameter (cuda/src/03-mla/mla_host.cpp).
//
// Every projection and every score / weighted-sum product of every rung runs through ONE kernel, the
// batched GEMM below (a real build may back the same call with cuBLAS). flash_mla adds its fused
// kernel -- a block per (sequence, head group, split), cache tiles in shared memory, the online
// softmax -- and a combine kernel that merges the splits by log-sum-exp.
#pragma once
#include <cstdint>
#include <vector>

#include "ladder/cuda/03-mla/mla_kernels.hpp"
#include "ladder/03-mla/config.hpp"

namespace ladder::cuda::mla {

using ladder::mla::Config;

// The project GEMM (Gemm: ladder/cuda/03-mla/mla_kernels.hpp), checked: sizes, strides, pointers.
void gemm(const Gemm& g);

// For tests: while a ForceGemm is alive, every gemm() call that leaves the kernel to the shapes
// (tile == 0 and split_k == 0) takes `tile` and `split_k` instead. The rungs' tests run at shapes
// small enough that every product picks the 16 x 16 kernel; forcing the 128 x 128 kernel or split-K
// puts the rungs' real operand layouts through the kernels DeepSeek-V2 shapes take. Not thread-safe:
// one at a time, on the thread that calls the rungs.
class ForceGemm {
 public:
  ForceGemm(int tile, int split_k);
  ~ForceGemm();
  ForceGemm(const ForceGemm&) = delete;
  ForceGemm& operator=(const ForceGemm&) = delete;

 private:
  int tile_, split_k_;
};

// Device-resident weights (layouts of ladder::mla::Weights; W_absQ, W_absO only for AM).
struct Weights {
  Config cfg;
  const float *W_DQ = nullptr, *q_norm = nullptr, *W_UQ = nullptr, *W_QR = nullptr, *kv_b = nullptr,
              *W_O = nullptr;
  const float *W_absQ = nullptr, *W_absO = nullptr;  // [H * kv_lora, q_lora], [hidden, H * kv_lora]
  const float *W_DKV = nullptr, *kv_norm = nullptr;   // [kv_lora + rope, hidden], [kv_lora]: prefill's own rows
};

// One decode step: h [B, hidden]; rope [B, rope] = cos(q_pos w_i) for i < rope/2, then sin(...) (the
// host computes the angles in double, as the reference does); seqlens [B] (device); Lmax = max L_b.
struct Step {
  int64_t B = 0, Lmax = 0;
  const float* h = nullptr;
  const float* rope = nullptr;
  const int64_t* seqlens = nullptr;
};

// u [B, hidden]; scores, attn [B, H, Lmax] (entries past L_b: -inf, 0) for every rung but flash_mla;
// lse [B, H] for flash_mla.
struct Out {
  float* u = nullptr;
  float* scores = nullptr;
  float* attn = nullptr;
  float* lse = nullptr;
};

// The rungs. K, V: CD's cache [B, H, Lmax, nope + rope], [B, H, Lmax, v]; kv: the compressed cache
// [B, Lmax, kv_lora + rope]; blocks [num_blocks, 64, kv_lora + rope] with block_table [B, max_blocks].
void cd(const Weights& W, const Step& s, const float* K, const float* V, const Out& out);
void cc(const Weights& W, const Step& s, const float* kv, const Out& out);
void a_cc(const Weights& W, const Step& s, const float* kv, const Out& out);
void a_cc_me(const Weights& W, const Step& s, const float* kv, const Out& out);
void am(const Weights& W, const Step& s, const float* kv, const Out& out);
void flash_mla(const Weights& W, const Step& s, const float* blocks, int64_t num_blocks, const int32_t* block_table,
               int64_t max_blocks, int64_t split_blocks, const Out& out);
// MLA's prefill, non-absorbed (ladder/03-mla/prefill.hpp, ChunkPath::Decompressed; FlashMLA's MHA mode): a chunk of
// q_lens[b] new tokens on a cached prefix of prefix[b] rows per sequence (host vectors, [B]). h [N, hidden] and
// rope [N, rope] (cos/sin of each token's position) hold the N = sum q_lens tokens sequence after sequence; kv
// [B, Lmax, kv_lora + rope] is the contiguous compressed cache, rows 0 .. prefix[b] - 1 filled. With write_rows
// the chunk's rows [RMSNorm(c^KV) | RoPE(k^R)] are formed from h (W_DKV, kv_norm) into kv at rows prefix[b] + i;
// without, they must be there already (a multi-token decode step's cache). Then per sequence: K = [W_UK c^KV | k^R]
// [H, L, nope + rope] and V = W_UV c^KV [H, L, v] by the GEMM, causal attention bottom right on stage 02's tiled
// kernel with d_v != d (cuda::attention::tiled_16), u = W_O o. Out: u [N, hidden], lse [N, H].
void prefill(const Weights& W, const std::vector<int64_t>& q_lens, const std::vector<int64_t>& prefix, int64_t Lmax,
             const float* h, const float* rope, float* kv, bool write_rows, float* u, float* lse);
// For tests: while a PlantMaskOffByOne is alive, prefill's attention takes one key fewer per sequence (Nk = L - 1 with
// the same K, V), so token i sees keys j <= prefix + i - 1: its own row hidden, a mask off by one the prefill goldens
// must reject (tests/03-mla/test_mla_cuda_prefill.cpp). Not thread-safe; one at a time.
class PlantMaskOffByOne {
 public:
  PlantMaskOffByOne();
  ~PlantMaskOffByOne();
  PlantMaskOffByOne(const PlantMaskOffByOne&) = delete;
  PlantMaskOffByOne& operator=(const PlantMaskOffByOne&) = delete;
};
// MLA's absorbed chunk (ladder/03-mla/prefill.hpp, ChunkPath::Absorbed; the rung chunk_absorbed, FlashMLA's MQA mode
// with s_q = q_lens[b] query tokens, MTP's verify step): the arguments and the rows written as prefill's; the
// attention is A_CC_ME's over the latent cache as stored (d_qk = kv_lora + rope, d_v = kv_lora) for every token
// of a sequence at once, token i seeing rows j <= prefix[b] + i; then u = W_O [W_UV o^lat].
// Out: u [N, hidden], lse [N, H].
void chunk_absorbed(const Weights& W, const std::vector<int64_t>& q_lens, const std::vector<int64_t>& prefix,
                    int64_t Lmax, const float* h, const float* rope, float* kv, bool write_rows, float* u, float* lse);
// For tests: while a PlantChunkSeesNext is alive, chunk_absorbed lets token i see one row more, j <= prefix + i + 1
// (clamped at the sequence's last row): the causal mask off by one towards the future, which only s_q > 1 shows --
// every token but a sequence's last sees its successor (tests/03-mla/test_mla_cuda_prefill.cpp). One at a time.
class PlantChunkSeesNext {
 public:
  PlantChunkSeesNext();
  ~PlantChunkSeesNext();
  PlantChunkSeesNext(const PlantChunkSeesNext&) = delete;
  PlantChunkSeesNext& operator=(const PlantChunkSeesNext&) = delete;
};
// AM's absorbed matrices through the same GEMM: W_absQ [H * kv_lora, q_lora], W_absO [hidden, H * kv_lora].
void absorb_weights(const Weights& W, float* W_absQ, float* W_absO);

}  // namespace ladder::cuda::mla
