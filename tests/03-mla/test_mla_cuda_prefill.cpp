// tests/03-mla/test_mla_cuda_prefill.cpp -- the CUDA prefill rung (cuda/src/03-mla/mla_prefill.cpp: the GEMM for the
// rows and the decompression, stage 02's tiled kernel with d_v != d_qk for the attention) judged on the chunk
// goldens through the contract, as `ladder run` and `ladder check` judge it: the ragged prefill chunk (prefixes 0,
// 64, 37; q_len 7, 1, 13: u, lse and the cache rows it writes) and the s_q = 2, 4 decode steps (rows cached). A
// planted mask off by one (cuda::mla::PlantMaskOffByOne: every token's own row hidden) must fail. Part of
// test_03_mla_cuda: CTest runs it under SIMT_SCHEDULE=forward, reverse and random:1, and once under TSan.
#include <doctest/doctest.h>

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

TEST_CASE("the CUDA prefill on the chunk goldens through the contract: u, lse and the rows it writes") {
  const Rung& r = registry().find(ref::kStage, "cuda", ref::kPrefillRung);
  int prefills = 0;
  for (const ref::ChunkCase& gc : ref::chunk_cases()) {
    CAPTURE(gc.name);
    const CaseFolder cf = read_case(mla_contract(), test::mla_dir(gc.name));
    const Tensors out = run_rung(mla_contract(), r, cf.inputs, cf.params, DType::F4);
    CHECK(out.count("kv_rows") == (gc.prefill ? 1u : 0u));
    prefills += gc.prefill;
    for (const auto& [name, cand] : out) {
      CAPTURE(name);
      CHECK(passes(cf, name, cand));
    }
  }
  CHECK(prefills >= 1);
  CHECK_THROWS_WITH_AS(run_rung(mla_contract(), r, read_case(mla_contract(), test::mla_dir("s_q_2")).inputs,
                                nlohmann::json::object(), DType::F8),
                       doctest::Contains("CUDA rungs run in float32 only"), Error);
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
#endif
