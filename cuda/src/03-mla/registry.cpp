// cuda/src/03-mla/registry.cpp -- the stage-03 CUDA rungs in the registry (backend "cuda").
//
// Each entry holds an mla::RungFns with f32 only. prepare: the reference's (the cache in the rung's
// layout is host data built at prefill; CD's decompressed K and V included) except AM, whose absorbed
// matrices come from the device GEMM (ladder::cuda::mla::absorb_weights). decode: uploads the
// weights, the step and the prepared cache, runs the rung of ladder/cuda/03-mla/mla.hpp, downloads u and
// scores / attn or lse. Cost: the reference formulas (same algorithm, same FLOPs and cache bytes).
#include <algorithm>
#include <cmath>

#include "ladder/core/registry.hpp"
#include "ladder/cuda/device.hpp"
#include "ladder/cuda/03-mla/mla.hpp"
#include "ladder/03-mla/mla.hpp"

namespace ladder::cuda {
namespace {

namespace ref = ladder::mla;
using ref::Variant;

// The weights on the device, and the view the kernels take.
struct DeviceModel {
  DeviceBuffer<float> W_DQ, q_norm, W_UQ, W_QR, kv_b, W_O, W_absQ, W_absO, W_DKV, kv_norm;
  mla::Weights view;

  DeviceModel(const ref::Weights<float>& W, const ref::Absorbed<float>* a)
      : W_DQ(W.W_DQ.data(), size_t(W.W_DQ.size())), q_norm(W.q_norm.data(), size_t(W.q_norm.size())),
        W_UQ(W.W_UQ.data(), size_t(W.W_UQ.size())), W_QR(W.W_QR.data(), size_t(W.W_QR.size())),
        kv_b(W.kv_b.data(), size_t(W.kv_b.size())), W_O(W.W_O.data(), size_t(W.W_O.size())) {
    if (a) {
      W_absQ = DeviceBuffer<float>(a->W_absQ.data(), size_t(a->W_absQ.size()));
      W_absO = DeviceBuffer<float>(a->W_absO.data(), size_t(a->W_absO.size()));
    }
    if (W.W_DKV.size() > 0 && W.kv_norm.size() > 0) {  // the prefill's own rows
      W_DKV = DeviceBuffer<float>(W.W_DKV.data(), size_t(W.W_DKV.size()));
      kv_norm = DeviceBuffer<float>(W.kv_norm.data(), size_t(W.kv_norm.size()));
      view.W_DKV = W_DKV.data(), view.kv_norm = kv_norm.data();
    }
    view.cfg = W.cfg;
    view.W_DQ = W_DQ.data(), view.q_norm = q_norm.data(), view.W_UQ = W_UQ.data(), view.W_QR = W_QR.data();
    view.kv_b = kv_b.data(), view.W_O = W_O.data(), view.W_absQ = W_absQ.data(), view.W_absO = W_absO.data();
  }
};

// cos / sin of q_pos[b] w_i, i < rope/2, angles in double as ladder/03-mla/layers.hpp forms them.
std::vector<float> rope_table(const ref::Config& c, const std::vector<int64_t>& q_pos) {
  const int64_t d = c.qk_rope, half = d / 2;
  std::vector<float> t(q_pos.size() * size_t(d));
  for (size_t b = 0; b < q_pos.size(); ++b)
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(q_pos[b]) *
                           std::pow(c.rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(d));
      t[b * size_t(d) + size_t(i)] = static_cast<float>(std::cos(angle));
      t[b * size_t(d) + size_t(half + i)] = static_cast<float>(std::sin(angle));
    }
  return t;
}

ref::Prepared<float> prepare(Variant v, const ref::Weights<float>& W, const ref::PagedCache<float>& cache) {
  if (v != Variant::AM) return ref::reference_rung<float>(v).prepare(W, cache);
  ref::Prepared<float> p = ref::prepare_compressed(W, cache);
  const ref::Config& c = W.cfg;
  DeviceModel dm(W, nullptr);
  DeviceBuffer<float> q(size_t(c.n_heads * c.kv_lora_rank * c.q_lora_rank)),
      o(size_t(c.hidden * c.n_heads * c.kv_lora_rank));
  mla::absorb_weights(dm.view, q.data(), o.data());
  sync();
  auto a = std::make_shared<ref::Absorbed<float>>();
  a->W_absQ = Mat<float>(c.n_heads * c.kv_lora_rank, c.q_lora_rank);
  a->W_absO = Mat<float>(c.hidden, c.n_heads * c.kv_lora_rank);
  q.copy_to_host(a->W_absQ.data(), q.size());
  o.copy_to_host(a->W_absO.data(), o.size());
  p.absorbed = a;
  return p;
}

ref::Output<float> decode(Variant v, const ref::Weights<float>& W, const ref::Prepared<float>& p,
                          const ref::Step<float>& step) {
  ref::check_step(W, p, step, "cuda");
  const ref::Config& c = W.cfg;
  const int64_t B = p.batch(), H = c.n_heads, Lmax = p.max_len();
  const bool flash = v == Variant::flash_mla;
  require(v != Variant::AM || p.absorbed != nullptr, "cuda AM: prepared.absorbed is null (run its prepare)");
  DeviceModel dm(W, v == Variant::AM ? p.absorbed.get() : nullptr);
  const std::vector<float> rope = rope_table(c, step.q_pos);
  DeviceBuffer<float> h(step.h.data(), size_t(step.h.size())), cs(rope);
  DeviceBuffer<int64_t> seqlens(p.seqlens);
  DeviceBuffer<float> u(size_t(B * c.hidden)), scores(flash ? 0 : size_t(B * H * Lmax)),
      attn(flash ? 0 : size_t(B * H * Lmax)), lse(flash ? size_t(B * H) : 0);
  const mla::Step s{B, Lmax, h.data(), cs.data(), seqlens.data()};
  const mla::Out out{u.data(), scores.data(), attn.data(), lse.data()};
  switch (v) {
    case Variant::CD: {
      DeviceBuffer<float> K(p.K.data), V(p.V.data);
      mla::cd(dm.view, s, K.data(), V.data(), out);
      sync();
      break;
    }
    case Variant::flash_mla: {
      DeviceBuffer<float> blocks(p.paged.blocks.data);
      DeviceBuffer<int32_t> table(p.paged.block_table.data);
      mla::flash_mla(dm.view, s, blocks.data(), p.paged.blocks.shape[0], table.data(), p.paged.block_table.shape[1],
                     ref::FlashParams{}.split_blocks, out);
      sync();
      break;
    }
    default: {
      DeviceBuffer<float> kv(p.kv.data);
      auto rung = v == Variant::CC ? &mla::cc : v == Variant::A_CC ? &mla::a_cc : v == Variant::AM ? &mla::am
                                                                                                    : &mla::a_cc_me;
      rung(dm.view, s, kv.data(), out);
      sync();
    }
  }
  ref::Output<float> r;
  r.u = Mat<float>(B, c.hidden);
  u.copy_to_host(r.u.data(), u.size());
  if (!flash) {
    r.scores = Array<float>({B, H, Lmax});
    r.attn = Array<float>({B, H, Lmax});
    scores.copy_to_host(r.scores.data.data(), scores.size());
    attn.copy_to_host(r.attn.data.data(), attn.size());
  } else {
    r.lse = Array<float>({B, H});
    lse.copy_to_host(r.lse.data.data(), lse.size());
  }
  return r;
}

// The chunk rungs' device functions (cuda::mla::prefill and cuda::mla::chunk_absorbed take the same arguments).
using ChunkKernel = void (*)(const mla::Weights&, const std::vector<int64_t>&, const std::vector<int64_t>&, int64_t,
                             const float*, const float*, float*, bool, float*, float*);

// A chunk rung's whole chunk (ref::ChunkFn): the cache gathered into its contiguous layout on the host (as the other
// rungs' prepare does), the chunk on the device (run), the rows it wrote put back into the pages.
ref::ChunkOutput<float> device_chunk(ChunkKernel run, const char* who, const ref::Weights<float>& W,
                                     ref::PagedCache<float>& cache, const Mat<float>& h,
                                     const std::vector<int64_t>& q_lens, const std::vector<int64_t>& q_pos,
                                     bool write_rows) {
  const ref::Config& c = W.cfg;
  const int64_t B = cache.batch(), N = h.rows(), D = c.kv_dim();
  require(static_cast<int64_t>(q_lens.size()) == B, "mla {}: q_lens.size = {} violates == cache batch B = {}", who,
          q_lens.size(), B);
  std::vector<int64_t> prefix = cache.seqlens, after = cache.seqlens;
  if (write_rows) {
    ref::check_chunk(W, cache, ref::Chunk<float>{h, q_lens}, who);
    for (int64_t b = 0; b < B; ++b) after[b] += q_lens[b];
  } else {
    ref::check_weights(W, who);
    ref::check_paged(cache, c, who);
    for (int64_t b = 0; b < B; ++b) {
      require(q_lens[b] >= 1 && q_lens[b] <= cache.seqlens[b], "mla {}: q_lens[{}] = {} violates 1 <= q_len <= "
              "cache.seqlens[{}] = {}", who, b, q_lens[b], b, cache.seqlens[b]);
      prefix[b] -= q_lens[b];
    }
  }
  require(static_cast<int64_t>(q_pos.size()) == N && N == ref::chunk_offsets(q_lens).back(),
          "mla {}: h.rows = {}, q_pos.size = {} violate == sum of q_lens", who, N, q_pos.size());
  ref::PagedCache<float> view = cache;
  view.seqlens = after;
  const Array<float> kv_host = ref::gather(view);  // [B, Lmax, D]; the chunk's rows NaN until written
  const int64_t Lmax = kv_host.shape[1];
  DeviceModel dm(W, nullptr);
  const std::vector<float> rope = rope_table(c, q_pos);
  DeviceBuffer<float> hd(h.data(), size_t(h.size())), cs(rope), kv(kv_host.data), u(size_t(N * c.hidden)),
      lse(size_t(N * c.n_heads));
  run(dm.view, q_lens, prefix, Lmax, hd.data(), cs.data(), kv.data(), write_rows, u.data(), lse.data());
  sync();
  ref::ChunkOutput<float> out;
  out.u = Mat<float>(N, c.hidden);
  out.lse = Array<float>({N, c.n_heads});
  u.copy_to_host(out.u.data(), u.size());
  lse.copy_to_host(out.lse.data.data(), lse.size());
  if (write_rows) {
    const std::vector<float> rows = kv.to_host();
    cache.seqlens = after;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = prefix[b]; j < after[b]; ++j)
        std::copy_n(&rows[size_t((b * Lmax + j) * D)], D, ref::cache_row(cache, b, j));
  }
  return out;
}

// Its decode-step form: one token per sequence, its row cached (a decode golden), the chunk of one.
ref::Output<float> device_chunk_decode(ChunkKernel run, const char* who, const ref::Weights<float>& W,
                                       const ref::Prepared<float>& p, const ref::Step<float>& step) {
  ref::check_step(W, p, step, who);
  ref::PagedCache<float> cache = p.paged;
  const ref::ChunkOutput<float> o =
      device_chunk(run, who, W, cache, step.h, std::vector<int64_t>(p.paged.seqlens.size(), 1), step.q_pos, false);
  ref::Output<float> r;
  r.u = o.u;
  r.lse = o.lse;
  return r;
}

}  // namespace

// Called by the list CMake generates from the folders cuda/src/NN-stage/ (cuda/CMakeLists.txt).
void rungs_03_mla(Registry& r) {
  auto add = [&r](Variant v, const char* id, const char* name, const char* doc) {
    ref::RungImpl<float> f32{[v](const ref::Weights<float>& W, const ref::PagedCache<float>& c) { return prepare(v, W, c); },
                             [v](const ref::Weights<float>& W, const ref::Prepared<float>& p,
                                 const ref::Step<float>& s) { return decode(v, W, p, s); }};
    r.add({ref::kStage, id, name, doc, "cuda", ref::RungFns{v, f32, {}},
           [v](const Shape& s) { return ref::step_cost(v, s); }, "as the reference rung (same algorithm)"});
  };
  add(Variant::CD, "CD", "CacheDecompressed on the GPU",
      "batched GEMM per (sequence, head) for q.K and a.V, softmax kernel per score row");
  add(Variant::CC, "CC", "CacheCompressed on the GPU", "decompression of every cached token by the GEMM each step, then CD");
  add(Variant::A_CC, "A_CC", "Absorbed_CacheCompressed on the GPU",
      "W_UK by the GEMM into q; key_states copied per head (a kernel); GEMMs per (sequence, head)");
  add(Variant::A_CC_ME, "A_CC_ME", "Absorbed_CacheCompressed_MoveElision on the GPU",
      "q_abs c^T + q_pe k_pe^T as two GEMMs over all heads per sequence, the cache read in place");
  add(Variant::AM, "AM", "AM_CC_ME on the GPU", "absorbed matrices made by the GEMM once; A_CC_ME's attention");
  add(Variant::flash_mla, "flash_mla", "FlashMLA-style fused decode kernel",
      "block per (split, sequence, head group): cache tiles in shared memory, online softmax; combine kernel");
  // The chunk rungs: the contract runs them on whole chunks (chunk_f32); a decode step is a chunk of one.
  auto add_chunk = [&r](const char* id, Variant like, ChunkKernel run, const char* who, const char* name,
                        const char* doc, const char* cost_doc) {
    ref::RungImpl<float> f32{&ref::prepare_chunk<float>,
                             [run, who](const ref::Weights<float>& W, const ref::Prepared<float>& p,
                                        const ref::Step<float>& s) { return device_chunk_decode(run, who, W, p, s); }};
    ref::ChunkFn chunk = [run, who](const ref::Weights<float>& W, ref::PagedCache<float>& cache, const Mat<float>& h,
                                    const std::vector<int64_t>& q_lens, const std::vector<int64_t>& q_pos,
                                    bool write_rows) {
      return device_chunk(run, who, W, cache, h, q_lens, q_pos, write_rows);
    };
    r.add({ref::kStage, id, name, doc, "cuda", ref::RungFns{like, f32, {}, chunk},
           [like](const Shape& s) { return ref::step_cost(like, s); }, cost_doc});
  };
  add_chunk(ref::kPrefillRung, Variant::CC, &mla::prefill, "cuda prefill", "prefill (non-absorbed) on the GPU",
            "chunk rows by the GEMM + RMSNorm + RoPE; K, V decompressed per head by the GEMM; stage 02's tiled kernel "
            "with d_qk = nope + rope, d_v = v, causal bottom right",
            "as the reference prefill rung (a decode step as CC; a chunk: chunk_cost(Decompressed, ...))");
  add_chunk(ref::kChunkAbsorbedRung, Variant::A_CC_ME, &mla::chunk_absorbed, "cuda chunk_absorbed",
            "chunk_absorbed (MTP verify, s_q tokens) on the GPU",
            "the prefill's chunk rows; A_CC_ME's GEMMs and softmax over the latent cache, one batch entry per query "
            "token, each limited to the rows it sees (causal bottom right); lse from the softmax kernel",
            "as the reference chunk_absorbed rung (a decode step as A_CC_ME; a chunk: chunk_cost(Absorbed, ...))");
}

}  // namespace ladder::cuda
