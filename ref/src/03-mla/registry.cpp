// ref/src/03-mla/registry.cpp -- stage 03 reference rungs in the registry.
//
// Every rung stores an mla::RungFns (mla.hpp): prepare + decode at float and double. Cost shape:
// mla::cost_shape(cfg, B, L, elem_bytes) = {B, L, elem_bytes, hidden, H, q_lora, kv_lora, nope, rope, v}.
#include "ladder/core/registry.hpp"
#include "ladder/03-mla/mla.hpp"

namespace ladder {

void register_mla(Registry& r) {
  using namespace mla;
  auto add = [&r](Variant v, const char* id, const char* name, const char* doc, const char* cost_doc) {
    r.add({kStage, id, name, doc, "ref", RungFns{v, reference_rung<float>(v), reference_rung<double>(v)},
           [v](const Shape& s) { return step_cost(v, s); }, cost_doc});
  };
  add(Variant::CD, "CD", "CacheDecompressed (the oracle at fp64)",
      "cache K [B,H,L,nope+rope] (k_pe per head) and V [B,H,L,v]; standard attention per head",
      "per token: cache H(nope+rope+v) elems, 2H(nope+rope) + 2Hv FLOPs (81.92 kB bf16, 0.08 MFLOP at V2)");
  add(Variant::CC, "CC", "CacheCompressed",
      "cache [B,L,kv_lora+rope]; every step decompresses all L tokens through kv_b, then CD's attention",
      "per token: cache kv_lora+rope elems, 2 kv_lora H(nope+v) + CD FLOPs (1.152 kB, 33.64 MFLOP at V2)");
  add(Variant::A_CC, "A_CC", "Absorbed_CacheCompressed",
      "W_UK absorbed into q, W_UV applied after a.c; key_states [B,H,L,576] materialised per head",
      "per token: cache kv_lora+rope elems, 2H(kv_lora+rope) + 2H kv_lora FLOPs (1.152 kB, 0.28 MFLOP); "
      "scratch BHL(kv_lora+rope)");
  add(Variant::A_CC_ME, "A_CC_ME", "Absorbed_CacheCompressed_MoveElision",
      "as A_CC without the concatenation: s = q_pe k_pe^T + q_abs c_KV^T over all heads, cache read in place",
      "per token: cache kv_lora+rope elems, 2H(kv_lora+rope) + 2H kv_lora FLOPs (1.152 kB, 0.28 MFLOP)");
  add(Variant::AM, "AM", "AM_CC_ME (materialised absorbed matrices)",
      "W_UQ.W_UK -> [H,kv_lora,q_lora] and W_O.W_UV -> [hidden,H,kv_lora] precomputed; A_CC_ME's attention",
      "per token as A_CC_ME; per query 2H kv_lora q_lora + 2 hidden H kv_lora (201 + 671 MFLOP at V2)");
  add(Variant::flash_mla, "flash_mla", "FlashMLA-style fused decode",
      "A_CC_ME + online softmax over 64-token pages of a paged cache, split-KV chunks merged by logsumexp",
      "per token as A_CC_ME, one pass over the cache, no scores in memory; scratch: split partials");
  // The chunk paths (prefill.hpp). Cost: as a decode step (q_len 1), the decode rung of the same arithmetic;
  // a chunk of q_len tokens on a prefix P: chunk_cost (cost.hpp), which `ladder reproduce 03-mla` prints.
  auto add_chunk = [&r](ChunkPath path, Variant like, const char* id, const char* name, const char* doc,
                        const char* cost_doc) {
    r.add({kStage, id, name, doc, "ref", RungFns{like, chunk_rung<float>(path), chunk_rung<double>(path)},
           [like](const Shape& s) { return step_cost(like, s); }, cost_doc});
  };
  add_chunk(ChunkPath::Decompressed, Variant::CC, kPrefillRung, "prefill (non-absorbed, FlashMLA's MHA mode)",
            "q_len new tokens per sequence on a cached prefix: writes their rows, decompresses K [L,nope+rope], "
            "V [L,v] per head, causal attention (bottom right); d_qk = 192, d_v = 128 at V2",
            "a decode step as CC; a chunk: chunk_cost(Decompressed, {B, P, q_len, ...}), 2H kv_lora(nope+v) per "
            "token of P + q_len and 2H(nope+rope+v) per causal pair");
  add_chunk(ChunkPath::Absorbed, Variant::A_CC_ME, kChunkAbsorbedRung, "chunk_absorbed (MTP verify, s_q tokens)",
            "A_CC_ME over s_q query tokens per sequence at once, causal among them (FlashMLA's s_q, MQA mode: "
            "d_qk = 576, d_v = 512 over the latent cache)",
            "a decode step as A_CC_ME; a chunk: chunk_cost(Absorbed, ...), 2H(2 kv_lora + rope) per causal pair");
}

}  // namespace ladder
