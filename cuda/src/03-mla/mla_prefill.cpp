// cuda/src/03-mla/mla_prefill.cpp -- stage 03 CUDA: MLA's prefill, non-absorbed (ladder/cuda/03-mla/mla.hpp, prefill),
// the launches that mirror ladder/03-mla/prefill.hpp's prefill_chunk with ChunkPath::Decompressed step for step:
//   1. the chunk's cache rows: [c^KV | k^R] = W_DKV h by the GEMM (two products: the c^KV rows and the k^R rows),
//      RMSNorm(c^KV) with kv_norm, RoPE(k^R) at each token's position, concatenated into the cache at prefix + i;
//   2. the query: c^Q, q^C, q^R (mla_host.cpp's query), [q^C_h | q^R_h] per head, head-major (swap_axes01);
//   3. per sequence b (L = prefix + q_len keys): K = [W_UK c^KV | k^R] [H, L, nope + rope], V = W_UV c^KV [H, L, v]
//      (the GEMM, as CC decompresses), then stage 02's tiled kernel with d = nope + rope and d_v = v, causal
//      aligned bottom right: token i sees keys j <= prefix + i (problem.hpp's rule: Nq = q_len, Nk = L);
//   4. o back to token-major, u = W_O o; lse [H, q_len] -> [q_len, H].
// Sizes are checked here (ladder::Error naming the parameter); the kernels: mla.cu, mla_gemm.cu, mla_prefill.cu,
// cuda/src/02-attention/attention_tiled.cu.
#include <algorithm>

#include "ladder/cuda/02-attention/attention.hpp"
#include "ladder/cuda/03-mla/mla.hpp"
#include "ladder/03-mla/config.hpp"
#include "mla_host_parts.hpp"

namespace ladder::cuda::mla {
namespace {

bool planted_off_by_one = false;  // PlantMaskOffByOne (mla.hpp)

}  // namespace

PlantMaskOffByOne::PlantMaskOffByOne() { planted_off_by_one = true; }
PlantMaskOffByOne::~PlantMaskOffByOne() { planted_off_by_one = false; }

// The pieces mla_chunk.cpp shares (mla_host_parts.hpp).
void chunk_rows(const Weights& W, const float* h, const float* rope, int64_t n, float* rows) {
  const Config& c = W.cfg;
  const int64_t R = c.kv_lora_rank;
  Buf cKV(size_t(n * R)), kR(size_t(n * c.qk_rope));
  linear(h, n, c.hidden, W.W_DKV, R, cKV.data());
  linear(h, n, c.hidden, W.W_DKV + R * c.hidden, c.qk_rope, kR.data());
  detail::launch_rms_norm(cKV.data(), W.kv_norm, n, R, R, static_cast<float>(c.rms_eps));
  detail::launch_rope(kR.data(), rope, n, 1, c.qk_rope);
  detail::launch_concat_heads(cKV.data(), R, kR.data(), c.qk_rope, rows, n);
}

int64_t check_chunk(const Weights& W, const std::vector<int64_t>& q_lens, const std::vector<int64_t>& prefix,
                    int64_t Lmax, const void* h, const void* rope, const void* kv, bool write_rows, const void* u,
                    const void* lse, const char* fn) {
  ladder::mla::check_config(W.cfg, fn);
  const int64_t B = static_cast<int64_t>(q_lens.size());
  require(B >= 1 && prefix.size() == q_lens.size(),
          "cuda::mla::{}: q_lens [{}], prefix [{}] violate equal sizes B >= 1", fn, q_lens.size(), prefix.size());
  int64_t N = 0;
  for (int64_t b = 0; b < B; ++b) {
    require(q_lens[b] >= 1 && prefix[b] >= 0 && prefix[b] + q_lens[b] <= Lmax, "cuda::mla::{}: q_lens[{}] = {}, "
            "prefix[{}] = {} violate q_len >= 1, prefix >= 0, prefix + q_len <= Lmax = {}", fn, b, q_lens[b], b,
            prefix[b], Lmax);
    N += q_lens[b];
  }
  require(h && rope && kv && u && lse && W.W_DQ && W.q_norm && W.W_UQ && W.W_QR && W.kv_b && W.W_O,
          "cuda::mla::{}: null h, rope, kv, u, lse or weight", fn);
  require(!write_rows || (W.W_DKV && W.kv_norm), "cuda::mla::{}: write_rows needs W_DKV and kv_norm (null)", fn);
  return N;
}

void prefill(const Weights& W, const std::vector<int64_t>& q_lens, const std::vector<int64_t>& prefix, int64_t Lmax,
             const float* h, const float* rope, float* kv, bool write_rows, float* u, float* lse) {
  const int64_t N = check_chunk(W, q_lens, prefix, Lmax, h, rope, kv, write_rows, u, lse, "prefill");
  const Config& c = W.cfg;
  const int64_t B = static_cast<int64_t>(q_lens.size()), H = c.n_heads, R = c.kv_lora_rank, D = c.kv_dim();
  const int64_t dk = c.q_head(), dv = c.v_head;
  require(dk <= attention::kMaxQKHeadDim && dv <= attention::kMaxHeadDim, "cuda::mla::prefill: nope + rope = {}, v = "
          "{} violate <= {}, <= {} (stage 02's tiled_16 with d_v != d)", dk, dv, attention::kMaxQKHeadDim,
          attention::kMaxHeadDim);

  Step s;
  s.B = N, s.Lmax = Lmax, s.h = h, s.rope = rope;
  const Query q = query(W, s, true);
  Buf qs(size_t(N * H * dk)), o(size_t(N * H * dv));
  detail::launch_concat_heads(q.q_nope.data(), c.qk_nope, q.q_pe.data(), c.qk_rope, qs.data(), N * H);  // [N, H, dk]
  for (int64_t b = 0, t0 = 0; b < B; t0 += q_lens[b], ++b) {
    const int64_t n = q_lens[b], L = prefix[b] + n;
    float* kvb = kv + b * Lmax * D;
    if (write_rows) chunk_rows(W, h + t0 * c.hidden, rope + t0 * c.qk_rope, n, kvb + prefix[b] * D);
    Buf K(size_t(H * L * dk)), V(size_t(H * L * dv)), Qh(size_t(H * n * dk)), Oh(size_t(H * n * dv)), lh(size_t(H * n));
    Gemm g;  // K^C_h = c^KV W_UK(h)^T, V_h = c^KV W_UV(h)^T: one batch entry per head
    g.M = L, g.N = c.qk_nope, g.K = R, g.batch = H;
    g.A = kvb, g.a_m = D;
    g.B = W.kv_b, g.b_o = c.kv_b_rows() * R, g.b_n = R;
    g.C = K.data(), g.c_o = L * dk, g.c_m = dk;
    gemm(g);
    g.N = dv, g.B = W.kv_b + c.qk_nope * R, g.C = V.data(), g.c_o = L * dv, g.c_m = dv;
    gemm(g);
    const DeviceBuffer<int64_t> len(&L, 1);
    detail::launch_copy_rope_part(kvb, D, R, c.qk_rope, K.data(), dk, c.qk_nope, 1, H, L, len.data());
    detail::launch_swap_axes01(qs.data() + t0 * H * dk, n, H, dk, Qh.data());  // [n, H, dk] -> [H, n, dk]
    attention::Problem p = attention::Problem::make(1, H, n, planted_off_by_one ? L - 1 : L, dk, true);
    p.dv = dv, p.scale = c.scale();
    attention::tiled_16(p, Qh.data(), K.data(), V.data(), Oh.data(), lh.data(), nullptr);
    detail::launch_swap_axes01(Oh.data(), H, n, dv, o.data() + t0 * H * dv);  // [H, n, dv] -> [n, H, dv]
    detail::launch_swap_axes01(lh.data(), H, n, 1, lse + t0 * H);
    sync();  // K, V, Qh, Oh, lh are freed at the end of this iteration
  }
  linear(o.data(), N, H * dv, W.W_O, c.hidden, u);
}

}  // namespace ladder::cuda::mla
