// tests/03-mla/test_mla_cuda_prefill.cpp -- the CUDA chunk rungs judged on the chunk goldens through the contract, as
// `ladder run` and `ladder check` judge them: the ragged prefill chunk (prefixes 0, 64, 37; q_len 7, 1, 13: u, lse and
// the cache rows it writes) and the s_q = 2, 4 decode steps (rows cached). prefill (cuda/src/03-mla/mla_prefill.cpp:
// the GEMM for the rows and the decompression, stage 02's tiled kernel with d_v != d_qk) and chunk_absorbed
// (cuda/src/03-mla/mla_chunk.cpp: A_CC_ME's GEMMs and softmax, one batch entry per query token limited to the rows
// it sees). Planted: the prefill's mask off by one (cuda::mla::PlantMaskOffByOne: every token's own row hidden) and
// chunk_absorbed's towards the future (cuda::mla::PlantChunkSeesNext: every token but a sequence's last sees its
// successor) must fail. Part of test_03_mla_cuda: CTest runs it under SIMT_SCHEDULE=forward, reverse and random:1,
// and once under TSan.
#include <doctest/doctest.h>

#include <utility>

#include "ladder/cuda/03-mla/mla.hpp"
#include "test_mla_util.hpp"

using namespace ladder;
namespace ref = ladder::mla;

namespace {

const Contract& mla_contract() { return contract(ref::kStage); }

bool passes(const CaseFolder& cf, const std::string& output, const NpyData& cand) {
  const CheckReport r = check(mla_contract(), cf.inputs, cf.params, cf.expected, output, cand);
  INFO(r.text);
  return r.pass;
}

}  // namespace

TEST_CASE("the CUDA chunk rungs on the chunk goldens through the contract: u, lse and the rows they write") {
  for (const char* id : {ref::kPrefillRung, ref::kChunkAbsorbedRung}) {
    CAPTURE(id);
    const Rung& r = registry().find(ref::kStage, "cuda", id);
    int prefills = 0, s_q = 0;
    for (const ref::ChunkCase& gc : ref::chunk_cases()) {
      CAPTURE(gc.name);
      const CaseFolder cf = read_case(mla_contract(), test::mla_dir(gc.name));
      const Tensors out = run_rung(mla_contract(), r, cf.inputs, cf.params, DType::F4);
      CHECK(out.count("kv_rows") == (gc.prefill ? 1u : 0u));
      prefills += gc.prefill;
      s_q += !gc.prefill;
      for (const auto& [name, cand] : out) {
        CAPTURE(name);
        CHECK(passes(cf, name, cand));
      }
    }
    CHECK(prefills >= 1);
    CHECK(s_q >= 2);  // s_q_2 and s_q_4
    CHECK_THROWS_WITH_AS(run_rung(mla_contract(), r, read_case(mla_contract(), test::mla_dir("s_q_2")).inputs,
                                  nlohmann::json::object(), DType::F8),
                         doctest::Contains("CUDA rungs run in float32 only"), Error);
  }
}

// At these shapes every product picks the 16 x 16 GEMM by itself; forced, chunk_absorbed's per-token lengths (a
// different one per batch entry of one launch, over a shared cache) go through the 128 x 128 kernel and split-K too.
TEST_CASE("the CUDA chunk_absorbed on s_q_4 and prefill_ragged with each GEMM kernel forced: 128 x 128, split-K") {
  const Rung& r = registry().find(ref::kStage, "cuda", ref::kChunkAbsorbedRung);
  for (const auto& choice : {std::pair{cuda::mla::kGemmTile, 1}, std::pair{cuda::mla::kGemmTile, 3}}) {
    const cuda::mla::ForceGemm force(choice.first, choice.second);
    for (const char* name : {"s_q_4", "prefill_ragged"}) {
      CAPTURE(name);
      CAPTURE(choice.second);
      const CaseFolder cf = read_case(mla_contract(), test::mla_dir(name));
      const Tensors out = run_rung(mla_contract(), r, cf.inputs, cf.params, DType::F4);
      for (const auto& [output, cand] : out) {
        CAPTURE(output);
        CHECK(passes(cf, output, cand));
      }
    }
  }
}

// A wrong result, not a race: the schedules' builds run it; in the TSan build the test above runs the same
// kernel (as the other stages' planted tests, which TSan skips too).
#if !defined(SIMT_TSAN)
TEST_CASE("a planted mask off by one in the CUDA prefill (each token's own row hidden) fails the prefill golden" *
          doctest::test_suite("judge")) {
  const Rung& r = registry().find(ref::kStage, "cuda", ref::kPrefillRung);
  const CaseFolder cf = read_case(mla_contract(), test::mla_dir("prefill_ragged"));
  Tensors out;
  {
    const cuda::mla::PlantMaskOffByOne planted;
    out = run_rung(mla_contract(), r, cf.inputs, cf.params, DType::F4);
  }
  CHECK(passes(cf, "kv_rows", out.at("kv_rows")));  // the rows do not depend on the mask
  CHECK_FALSE(passes(cf, "u", out.at("u")));
  CHECK_FALSE(passes(cf, "lse", out.at("lse")));
  // And without the plant, the same run passes (the scope restored the mask).
  const Tensors right = run_rung(mla_contract(), r, cf.inputs, cf.params, DType::F4);
  CHECK(passes(cf, "u", right.at("u")));
}

TEST_CASE("a planted causal mask off by one in the CUDA chunk_absorbed (each token sees its successor) fails the s_q "
          "and prefill goldens" * doctest::test_suite("judge")) {
  const Rung& r = registry().find(ref::kStage, "cuda", ref::kChunkAbsorbedRung);
  for (const char* name : {"s_q_2", "s_q_4", "prefill_ragged"}) {
    CAPTURE(name);
    const CaseFolder cf = read_case(mla_contract(), test::mla_dir(name));
    Tensors out;
    {
      const cuda::mla::PlantChunkSeesNext planted;
      out = run_rung(mla_contract(), r, cf.inputs, cf.params, DType::F4);
    }
    if (out.count("kv_rows")) CHECK(passes(cf, "kv_rows", out.at("kv_rows")));  // the rows do not depend on the mask
    CHECK_FALSE(passes(cf, "u", out.at("u")));
    CHECK_FALSE(passes(cf, "lse", out.at("lse")));
    const Tensors right = run_rung(mla_contract(), r, cf.inputs, cf.params, DType::F4);
    CHECK(passes(cf, "u", right.at("u")));
    CHECK(passes(cf, "lse", right.at("lse")));
  }
  // A chunk of one token per sequence (a decode golden) has no successor to see: the plant changes nothing there,
  // which is why only s_q > 1 can catch it.
  const CaseFolder one = read_case(mla_contract(), test::mla_dir("batch_ragged"));
  const cuda::mla::PlantChunkSeesNext planted;
  const Tensors out = run_rung(mla_contract(), r, one.inputs, one.params, DType::F4);
  CHECK(passes(one, "u", out.at("u")));
  CHECK(passes(one, "lse", out.at("lse")));
}
#endif
