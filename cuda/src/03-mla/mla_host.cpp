// cuda/src/03-mla/mla_host.cpp -- the checked host API of the stage-03 kernels (ladder/cuda/03-mla/mla.hpp) and
// their registry entries. Sizes are validated here (ladder::Error naming the parameter); each rung is
// the sequence of launches of cuda/src/03-mla/*.cu that mirrors its reference in
// ladder/03-mla/*.hpp step for step, with scratch in DeviceBuffers. The registry entries (backend "cuda")
// take the references' prepare (the cache layouts are host data) -- except AM, whose absorbed matrices
// come from the device GEMM -- and a decode that uploads, launches and downloads, so tests, the CLI and
// notebooks call a CUDA rung exactly like a reference rung. (f64 is empty: fp32 kernels.)
#include <cmath>

#include "ladder/core/registry.hpp"
#include "ladder/cuda/device.hpp"
#include "ladder/cuda/03-mla/mla.hpp"
#include "ladder/03-mla/mla.hpp"
#include "mla_host_parts.hpp"

namespace ladder::cuda::mla {

// The pieces mla_prefill.cpp and mla_chunk.cpp share (mla_host_parts.hpp).
// y [M, N] = x [M, K] W^T, W an nn.Linear weight [N, K].
void linear(const float* x, int64_t M, int64_t K, const float* W, int64_t N, float* y) {
  Gemm g;
  g.M = M, g.N = N, g.K = K, g.A = x, g.a_m = K, g.B = W, g.b_n = K, g.C = y, g.c_m = N;
  gemm(g);
}

// c^Q = RMSNorm(W_DQ h), q^C = W_UQ c^Q (if wanted), q^R = RoPE(W_QR c^Q): layers.hpp.
Query query(const Weights& W, const Step& s, bool nope) {
  const Config& c = W.cfg;
  Query q{Buf(size_t(s.B * c.q_lora_rank)), Buf(size_t(nope ? s.B * c.n_heads * c.qk_nope : 0)),
          Buf(size_t(s.B * c.n_heads * c.qk_rope))};
  linear(s.h, s.B, c.hidden, W.W_DQ, c.q_lora_rank, q.cQ.data());
  detail::launch_rms_norm(q.cQ.data(), W.q_norm, s.B, c.q_lora_rank, c.q_lora_rank, static_cast<float>(c.rms_eps));
  if (nope) linear(q.cQ.data(), s.B, c.q_lora_rank, W.W_UQ, c.n_heads * c.qk_nope, q.q_nope.data());
  linear(q.cQ.data(), s.B, c.q_lora_rank, W.W_QR, c.n_heads * c.qk_rope, q.q_pe.data());
  detail::launch_rope(q.q_pe.data(), s.rope, s.B, c.n_heads, c.qk_rope);
  return q;
}

// q_abs_h = q^C_h W_UK(h), one batch entry per head (mla_host_parts.hpp).
Buf absorb_query(const Weights& W, const float* q_nope, int64_t B) {
  const Config& c = W.cfg;
  const int64_t R = c.kv_lora_rank, H = c.n_heads;
  Buf q_abs(size_t(B * H * R));
  Gemm g;
  g.M = B, g.N = R, g.K = c.qk_nope, g.batch = H;
  g.A = q_nope, g.a_o = c.qk_nope, g.a_m = H * c.qk_nope;
  g.B = W.kv_b, g.b_o = c.kv_b_rows() * R, g.b_n = 1, g.b_k = R;
  g.C = q_abs.data(), g.c_o = R, g.c_m = H * R;
  gemm(g);
  return q_abs;
}

// u = W_O [W_UV(h) o^lat_h]_h.
void absorbed_output(const Weights& W, const float* o_lat, int64_t B, float* u) {
  const Config& c = W.cfg;
  const int64_t R = c.kv_lora_rank, H = c.n_heads;
  Buf o(size_t(B * H * c.v_head));
  Gemm g;
  g.M = B, g.N = c.v_head, g.K = R, g.batch = H;
  g.A = o_lat, g.a_o = R, g.a_m = H * R;
  g.B = W.kv_b + c.qk_nope * R, g.b_o = c.kv_b_rows() * R, g.b_n = R;
  g.C = o.data(), g.c_o = c.v_head, g.c_m = H * c.v_head;
  gemm(g);
  linear(o.data(), B, H * c.v_head, W.W_O, c.hidden, u);
}

// A_CC_ME's attention (AM's, chunk_absorbed's), one batch entry per query token: S = q_abs c^T + q^R k^R^T,
// softmax, o^lat = a c, reading the cache in place at kv + z * kv_stride (mla_host_parts.hpp).
void attend_latent_me(const Weights& W, const Step& s, const float* q_abs, const float* q_pe, const float* kv,
                      int64_t kv_stride, const Out& out, float* o_lat, float* lse) {
  const Config& c = W.cfg;
  const int64_t R = c.kv_lora_rank, H = c.n_heads, D = c.kv_dim(), L = s.Lmax;
  Gemm g;
  g.M = H, g.N = L, g.K = R, g.batch = s.B, g.lens = s.seqlens, g.lens_on_n = true;
  g.A = q_abs, g.a_o = H * R, g.a_m = R;
  g.B = kv, g.b_o = kv_stride, g.b_n = D;
  g.C = out.scores, g.c_o = H * L, g.c_m = L;
  gemm(g);
  g.K = c.qk_rope, g.A = q_pe, g.a_o = H * c.qk_rope, g.a_m = c.qk_rope, g.B = kv + R, g.accumulate = true;
  gemm(g);
  detail::launch_scale_softmax(out.scores, out.attn, s.B * H, L, s.seqlens, H, static_cast<float>(c.scale()), lse);
  Gemm p;
  p.M = H, p.N = R, p.K = L, p.batch = s.B, p.lens = s.seqlens, p.lens_on_k = true;
  p.A = out.attn, p.a_o = H * L, p.a_m = L;
  p.B = kv, p.b_o = kv_stride, p.b_n = 1, p.b_k = D;
  p.C = o_lat, p.c_o = H * R, p.c_m = R;
  gemm(p);
}

namespace {

void check_step(const Weights& W, const Step& s, const char* fn) {
  ladder::mla::check_config(W.cfg, fn);
  require(s.B >= 1, "cuda::mla::{}: B = {} violates B >= 1", fn, s.B);
  require(s.Lmax >= 1, "cuda::mla::{}: Lmax = {} violates Lmax >= 1", fn, s.Lmax);
  require(s.h && s.rope && s.seqlens, "cuda::mla::{}: null h, rope or seqlens", fn);
  require(W.W_DQ && W.q_norm && W.W_QR, "cuda::mla::{}: null W_DQ, q_norm or W_QR", fn);
}

// CD's attention over K [B, H, Lmax, dk], V [B, H, Lmax, v]: one batch entry per (sequence, head).
void attend_decompressed(const Weights& W, const Step& s, const float* q_nope, const float* q_pe, const float* K,
                         const float* V, const Out& out, float* o) {
  const Config& c = W.cfg;
  const int64_t H = c.n_heads, L = s.Lmax, dk = c.q_head(), v = c.v_head;
  Buf q(size_t(s.B * H * dk));  // query_states = [q^C_h | q^R_h]
  detail::launch_concat_heads(q_nope, c.qk_nope, q_pe, c.qk_rope, q.data(), s.B * H);
  Gemm g;
  g.M = 1, g.N = L, g.K = dk, g.batch = s.B * H, g.inner = H, g.lens = s.seqlens, g.lens_on_n = true;
  g.A = q.data(), g.a_o = H * dk, g.a_i = dk;
  g.B = K, g.b_o = H * L * dk, g.b_i = L * dk, g.b_n = dk;
  g.C = out.scores, g.c_o = H * L, g.c_i = L;
  gemm(g);
  detail::launch_scale_softmax(out.scores, out.attn, s.B * H, L, s.seqlens, H, static_cast<float>(c.scale()));
  Gemm p;
  p.M = 1, p.N = v, p.K = L, p.batch = s.B * H, p.inner = H, p.lens = s.seqlens, p.lens_on_k = true;
  p.A = out.attn, p.a_o = H * L, p.a_i = L;
  p.B = V, p.b_o = H * L * v, p.b_i = L * v, p.b_n = 1, p.b_k = v;
  p.C = o, p.c_o = H * v, p.c_i = v;
  gemm(p);
}

void check_out(const Out& out, bool scores, const char* fn) {
  require(out.u != nullptr, "cuda::mla::{}: out.u = nullptr", fn);
  if (scores) require(out.scores && out.attn, "cuda::mla::{}: out.scores and out.attn are required", fn);
}

}  // namespace

namespace {
int forced_tile = 0, forced_split_k = 0;  // ForceGemm's choice (0, 0: the shapes choose)
}  // namespace

ForceGemm::ForceGemm(int tile, int split_k) : tile_(forced_tile), split_k_(forced_split_k) {
  require(tile == 0 || tile == kGemmTile || tile == kGemmSmallTile,
          "cuda::mla::ForceGemm: tile = {} violates tile in {{0, {}, {}}}", tile, kGemmSmallTile, kGemmTile);
  require(split_k >= 0 && (split_k <= 1 || tile == kGemmTile),
          "cuda::mla::ForceGemm: split_k = {} violates split_k >= 0, and split_k <= 1 unless tile = {}", split_k,
          kGemmTile);
  forced_tile = tile;
  forced_split_k = split_k;
}
ForceGemm::~ForceGemm() {
  forced_tile = tile_;
  forced_split_k = split_k_;
}

void gemm(const Gemm& given) {
  Gemm g = given;
  if (g.tile == 0 && g.split_k == 0) g.tile = forced_tile, g.split_k = forced_split_k;
  require(g.M >= 0 && g.N >= 0 && g.K >= 0, "cuda::mla::gemm: M, N, K = {}, {}, {} violate >= 0", g.M, g.N, g.K);
  require(g.inner >= 1 && g.batch >= 1 && g.batch % g.inner == 0,
          "cuda::mla::gemm: batch = {}, inner = {} violate batch >= 1, inner >= 1, batch % inner == 0", g.batch,
          g.inner);
  require(g.batch <= 65535, "cuda::mla::gemm: batch = {} violates batch <= 65535 (grid.z)", g.batch);
  require(g.tile == 0 || g.tile == kGemmTile || g.tile == kGemmSmallTile,
          "cuda::mla::gemm: tile = {} violates tile in {{0, {}, {}}}", g.tile, kGemmSmallTile, kGemmTile);
  require(g.split_k >= 0 && (g.split_k <= 1 || g.tile != kGemmSmallTile),
          "cuda::mla::gemm: split_k = {} with tile = {} violates split_k >= 0, and split_k <= 1 unless tile in "
          "{{0, {}}}",
          g.split_k, g.tile, kGemmTile);
  require(g.pipeline >= -1 && g.pipeline <= 1, "cuda::mla::gemm: pipeline = {} violates pipeline in {{-1, 0, 1}}",
          g.pipeline);
  require((g.M + gemm_tile(g) - 1) / gemm_tile(g) <= 65535, "cuda::mla::gemm: M = {} violates M <= {} * 65535",
          g.M, gemm_tile(g));
  const int64_t S = gemm_tile(g) == kGemmTile ? gemm_split(g) : 1;
  require(g.batch * S <= 65535, "cuda::mla::gemm: batch = {} x split_k = {} violates <= 65535 (grid.z)", g.batch, S);
  require(g.M * g.N == 0 || (g.A && g.B && g.C), "cuda::mla::gemm: null A, B or C with M x N = {} x {}", g.M, g.N);
  if (g.M * g.N == 0) return;
  Buf workspace(size_t(gemm_workspace(g)));  // split-K's partial tiles; none otherwise
  detail::launch_gemm(g, workspace.data());
}

void cd(const Weights& W, const Step& s, const float* K, const float* V, const Out& out) {
  check_step(W, s, "cd");
  check_out(out, true, "cd");
  require(K && V && W.W_UQ && W.W_O, "cuda::mla::cd: null K, V, W_UQ or W_O");
  const Query q = query(W, s, true);
  Buf o(size_t(s.B * W.cfg.n_heads * W.cfg.v_head));
  attend_decompressed(W, s, q.q_nope.data(), q.q_pe.data(), K, V, out, o.data());
  linear(o.data(), s.B, W.cfg.n_heads * W.cfg.v_head, W.W_O, W.cfg.hidden, out.u);
}

void cc(const Weights& W, const Step& s, const float* kv, const Out& out) {
  check_step(W, s, "cc");
  check_out(out, true, "cc");
  require(kv && W.W_UQ && W.kv_b && W.W_O, "cuda::mla::cc: null kv, W_UQ, kv_b or W_O");
  const Config& c = W.cfg;
  const int64_t H = c.n_heads, L = s.Lmax, R = c.kv_lora_rank, D = c.kv_dim(), dk = c.q_head();
  Buf K(size_t(s.B * H * L * dk)), V(size_t(s.B * H * L * c.v_head));
  Gemm g;  // the decompression, every step: K^C and V of every cached token of every head
  g.M = L, g.N = c.qk_nope, g.K = R, g.batch = s.B * H, g.inner = H, g.lens = s.seqlens, g.lens_on_m = true;
  g.A = kv, g.a_o = L * D, g.a_m = D;
  g.B = W.kv_b, g.b_i = c.kv_b_rows() * R, g.b_n = R;
  g.C = K.data(), g.c_o = H * L * dk, g.c_i = L * dk, g.c_m = dk;
  gemm(g);
  g.N = c.v_head, g.B = W.kv_b + c.qk_nope * R, g.C = V.data(), g.c_o = H * L * c.v_head, g.c_i = L * c.v_head,
  g.c_m = c.v_head;
  gemm(g);
  detail::launch_copy_rope_part(kv, D, R, c.qk_rope, K.data(), dk, c.qk_nope, s.B, H, L, s.seqlens);
  const Query q = query(W, s, true);
  Buf o(size_t(s.B * H * c.v_head));
  attend_decompressed(W, s, q.q_nope.data(), q.q_pe.data(), K.data(), V.data(), out, o.data());
  linear(o.data(), s.B, H * c.v_head, W.W_O, c.hidden, out.u);
}

void a_cc(const Weights& W, const Step& s, const float* kv, const Out& out) {
  check_step(W, s, "a_cc");
  check_out(out, true, "a_cc");
  require(kv && W.W_UQ && W.kv_b && W.W_O, "cuda::mla::a_cc: null kv, W_UQ, kv_b or W_O");
  const Config& c = W.cfg;
  const int64_t H = c.n_heads, L = s.Lmax, R = c.kv_lora_rank, D = c.kv_dim();
  const Query q = query(W, s, true);
  const Buf q_abs = absorb_query(W, q.q_nope.data(), s.B);
  Buf qs(size_t(s.B * H * D)), ks(size_t(s.B * H * L * D)), o_lat(size_t(s.B * H * R));
  detail::launch_concat_heads(q_abs.data(), R, q.q_pe.data(), c.qk_rope, qs.data(), s.B * H);
  detail::launch_replicate_rows(kv, D, ks.data(), s.B, H, L, s.seqlens);  // key_states, materialised
  Gemm g;
  g.M = 1, g.N = L, g.K = D, g.batch = s.B * H, g.inner = H, g.lens = s.seqlens, g.lens_on_n = true;
  g.A = qs.data(), g.a_o = H * D, g.a_i = D;
  g.B = ks.data(), g.b_o = H * L * D, g.b_i = L * D, g.b_n = D;
  g.C = out.scores, g.c_o = H * L, g.c_i = L;
  gemm(g);
  detail::launch_scale_softmax(out.scores, out.attn, s.B * H, L, s.seqlens, H, static_cast<float>(c.scale()));
  Gemm p;
  p.M = 1, p.N = R, p.K = L, p.batch = s.B * H, p.inner = H, p.lens = s.seqlens, p.lens_on_k = true;
  p.A = out.attn, p.a_o = H * L, p.a_i = L;
  p.B = ks.data(), p.b_o = H * L * D, p.b_i = L * D, p.b_n = 1, p.b_k = D;
  p.C = o_lat.data(), p.c_o = H * R, p.c_i = R;
  gemm(p);
  absorbed_output(W, o_lat.data(), s.B, out.u);
}

void a_cc_me(const Weights& W, const Step& s, const float* kv, const Out& out) {
  check_step(W, s, "a_cc_me");
  check_out(out, true, "a_cc_me");
  require(kv && W.W_UQ && W.kv_b && W.W_O, "cuda::mla::a_cc_me: null kv, W_UQ, kv_b or W_O");
  const Query q = query(W, s, true);
  const Buf q_abs = absorb_query(W, q.q_nope.data(), s.B);
  Buf o_lat(size_t(s.B * W.cfg.n_heads * W.cfg.kv_lora_rank));
  attend_latent_me(W, s, q_abs.data(), q.q_pe.data(), kv, s.Lmax * W.cfg.kv_dim(), out, o_lat.data(), nullptr);
  absorbed_output(W, o_lat.data(), s.B, out.u);
}

void am(const Weights& W, const Step& s, const float* kv, const Out& out) {
  check_step(W, s, "am");
  check_out(out, true, "am");
  require(kv && W.W_absQ && W.W_absO, "cuda::mla::am: null kv, W_absQ or W_absO (see absorb_weights)");
  const Config& c = W.cfg;
  const int64_t HR = c.n_heads * c.kv_lora_rank;
  const Query q = query(W, s, false);  // no q^C: W_absQ maps c^Q straight to q_abs
  Buf q_abs(size_t(s.B * HR)), o_lat(size_t(s.B * HR));
  linear(q.cQ.data(), s.B, c.q_lora_rank, W.W_absQ, HR, q_abs.data());
  attend_latent_me(W, s, q_abs.data(), q.q_pe.data(), kv, s.Lmax * W.cfg.kv_dim(), out, o_lat.data(), nullptr);
  linear(o_lat.data(), s.B, HR, W.W_absO, c.hidden, out.u);
}

void absorb_weights(const Weights& W, float* W_absQ, float* W_absO) {
  ladder::mla::check_config(W.cfg, "absorb_weights");
  require(W.W_UQ && W.kv_b && W.W_O && W_absQ && W_absO, "cuda::mla::absorb_weights: null pointer");
  const Config& c = W.cfg;
  const int64_t R = c.kv_lora_rank, H = c.n_heads, ql = c.q_lora_rank, nv = c.kv_b_rows() * R;
  Gemm q;  // W_absQ_h [R, q_lora] = W_UK(h)^T W_UQ_h
  q.M = R, q.N = ql, q.K = c.qk_nope, q.batch = H;
  q.A = W.kv_b, q.a_o = nv, q.a_m = 1, q.a_k = R;
  q.B = W.W_UQ, q.b_o = c.qk_nope * ql, q.b_n = 1, q.b_k = ql;
  q.C = W_absQ, q.c_o = R * ql, q.c_m = ql;
  gemm(q);
  Gemm o;  // W_absO[:, h] [hidden, R] = W_O[:, h*v : (h+1)*v] W_UV(h)
  o.M = c.hidden, o.N = R, o.K = c.v_head, o.batch = H;
  o.A = W.W_O, o.a_o = c.v_head, o.a_m = H * c.v_head;
  o.B = W.kv_b + c.qk_nope * R, o.b_o = nv, o.b_n = 1, o.b_k = R;
  o.C = W_absO, o.c_o = R, o.c_m = H * R;
  gemm(o);
}

void flash_mla(const Weights& W, const Step& s, const float* blocks, int64_t num_blocks, const int32_t* block_table,
               int64_t max_blocks, int64_t split_blocks, const Out& out) {
  check_step(W, s, "flash_mla");
  require(out.u && out.lse, "cuda::mla::flash_mla: out.u and out.lse are required");
  require(blocks && block_table && num_blocks >= 1, "cuda::mla::flash_mla: null blocks or block_table");
  require(split_blocks >= 1, "cuda::mla::flash_mla: split_blocks = {} violates split_blocks >= 1", split_blocks);
  const Config& c = W.cfg;
  const int64_t H = c.n_heads, R = c.kv_lora_rank, D = c.kv_dim();
  require(R <= kFlashMaxR,
          "cuda::mla::flash_mla: kv_lora_rank = {} violates kv_lora_rank <= {} (flash_split keeps o [{} heads, {}] in "
          "registers)",
          R, kFlashMaxR, kFlashHeads, kFlashMaxR);
  require(D < (int64_t{1} << 25), "cuda::mla::flash_mla: kv_lora_rank + qk_rope = {} violates < 2^25 (flash_split's "
          "32-bit offsets within a 64-row page)", D);
  const int64_t smem = flash_split_smem_bytes(R);
  require(smem <= 48 * 1024, "cuda::mla::flash_mla: kv_lora_rank = {} needs {} bytes of shared memory, > 48 KiB", R,
          smem);
  require(max_blocks * 64 >= s.Lmax, "cuda::mla::flash_mla: max_blocks = {} cannot hold Lmax = {}", max_blocks, s.Lmax);
  const int64_t max_splits = ((s.Lmax + 63) / 64 + split_blocks - 1) / split_blocks;
  require(max_splits <= 65535, "cuda::mla::flash_mla: split_blocks = {} gives {} splits of Lmax = {}, > 65535 (grid.y)",
          split_blocks, max_splits, s.Lmax);
  require(s.B <= 65535, "cuda::mla::flash_mla: B = {} violates B <= 65535 (grid.z)", s.B);
  const Query q = query(W, s, true);
  const Buf q_abs = absorb_query(W, q.q_nope.data(), s.B);
  Buf Q(size_t(s.B * H * D));  // FlashMLA's q: [q_abs | q^R] per head
  detail::launch_concat_heads(q_abs.data(), R, q.q_pe.data(), c.qk_rope, Q.data(), s.B * H);
  Buf o_parts(size_t(max_splits * s.B * H * R)), lse_parts(size_t(max_splits * s.B * H)), o_lat(size_t(s.B * H * R));
  detail::launch_flash_split(Q.data(), blocks, block_table, max_blocks, s.seqlens, s.B, H, R, D, split_blocks,
                             max_splits, static_cast<float>(c.scale()), o_parts.data(), lse_parts.data());
  detail::launch_flash_combine(o_parts.data(), lse_parts.data(), s.seqlens, s.B, H, R, split_blocks, o_lat.data(),
                               out.lse);
  absorbed_output(W, o_lat.data(), s.B, out.u);
}

}  // namespace ladder::cuda::mla
