// cuda/src/03-mla/mla_chunk.cpp -- stage 03 CUDA: chunk_absorbed, MLA's absorbed path for a chunk of s_q query tokens
// per sequence (ladder/cuda/03-mla/mla.hpp), the launches that mirror ladder/03-mla/prefill.hpp's prefill_chunk and
// attend_chunk with ChunkPath::Absorbed (chunk_attend_absorbed) step for step:
//   1. with write_rows, the chunk's cache rows as the prefill forms them (chunk_rows) into kv at prefix + i;
//   2. the query of all N tokens at once (query), q_abs = q^C W_UK per head (absorb_query);
//   3. per sequence b, A_CC_ME's attention (attend_latent_me, mla_host.cpp): one GEMM batch entry per token of the
//      chunk, every entry over the same cache rows (kv_stride 0), token i over its visible rows n_i = prefix + i + 1
//      only -- the causal mask aligned bottom right is the GEMMs' per-entry length and the softmax's row length
//      (scale_softmax_rows, mla.cu, which also writes each row's lse);
//   4. u = W_O [W_UV(h) o^lat_h]_h for all N tokens (absorbed_output).
// No kernel of its own: the decode rungs' GEMM and softmax kernels, given per-token lengths. Sizes are checked as
// the prefill's (check_chunk, mla_prefill.cpp).
#include <algorithm>

#include "ladder/cuda/03-mla/mla.hpp"
#include "mla_host_parts.hpp"

namespace ladder::cuda::mla {
namespace {

bool planted_sees_next = false;  // PlantChunkSeesNext (mla.hpp)

}  // namespace

PlantChunkSeesNext::PlantChunkSeesNext() { planted_sees_next = true; }
PlantChunkSeesNext::~PlantChunkSeesNext() { planted_sees_next = false; }

void chunk_absorbed(const Weights& W, const std::vector<int64_t>& q_lens, const std::vector<int64_t>& prefix,
                    int64_t Lmax, const float* h, const float* rope, float* kv, bool write_rows, float* u, float* lse) {
  const int64_t N = check_chunk(W, q_lens, prefix, Lmax, h, rope, kv, write_rows, u, lse, "chunk_absorbed");
  const Config& c = W.cfg;
  const int64_t B = static_cast<int64_t>(q_lens.size()), H = c.n_heads, R = c.kv_lora_rank, D = c.kv_dim();
  // Token i of sequence b sees rows j <= prefix[b] + i: n_i rows (the plant: one more, never past the last row).
  std::vector<int64_t> visible(static_cast<size_t>(N));
  int64_t scratch = 0;  // scores of the largest sequence, [q_len, H, L]
  for (int64_t b = 0, t = 0; b < B; ++b) {
    const int64_t L = prefix[b] + q_lens[b];
    for (int64_t i = 0; i < q_lens[b]; ++i, ++t)
      visible[size_t(t)] = std::min(prefix[b] + i + 1 + (planted_sees_next ? 1 : 0), L);
    scratch = std::max(scratch, q_lens[b] * H * L);
  }
  const DeviceBuffer<int64_t> lens(visible);
  for (int64_t b = 0, t0 = 0; write_rows && b < B; t0 += q_lens[b], ++b)
    chunk_rows(W, h + t0 * c.hidden, rope + t0 * c.qk_rope, q_lens[b], kv + (b * Lmax + prefix[b]) * D);
  Step s;
  s.B = N, s.Lmax = Lmax, s.h = h, s.rope = rope;
  const Query q = query(W, s, true);
  const Buf q_abs = absorb_query(W, q.q_nope.data(), N);
  Buf o_lat(size_t(N * H * R)), scores(static_cast<size_t>(scratch)), attn(static_cast<size_t>(scratch));
  for (int64_t b = 0, t0 = 0; b < B; t0 += q_lens[b], ++b) {
    Step sb;  // the chunk's tokens of sequence b as a batch over one cache of L rows
    sb.B = q_lens[b], sb.Lmax = prefix[b] + q_lens[b], sb.seqlens = lens.data() + t0;
    Out out;
    out.scores = scores.data(), out.attn = attn.data();
    attend_latent_me(W, sb, q_abs.data() + t0 * H * R, q.q_pe.data() + t0 * H * c.qk_rope, kv + b * Lmax * D, 0, out,
                     o_lat.data() + t0 * H * R, lse + t0 * H);
  }
  absorbed_output(W, o_lat.data(), N, u);
}

}  // namespace ladder::cuda::mla
