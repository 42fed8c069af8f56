// tools/ladder/03-mla/mutants.cpp -- the mutation catalogue's FlashMLA part (mutants.hpp): stage 03 in FlashMLA's
// layouts (ladder/03-mla/flashmla.hpp), each bug class as the candidate a port with that bug writes (the flash_mla rung
// with the bug planted in its reading of the FP8 records, the indices, topk_length or attn_sink), beside correct
// variants (the same rung at other split sizes). Small dims, the same code paths (FP8: two 128-value scale groups).
#include <fmt/format.h>

#include "ladder/03-mla/flashmla.hpp"
#include "mutants.hpp"

namespace ladder::mutants {
namespace {

using mla::FlashMlaBug;

struct Case {
  const char* layout;
  Tensors in;
  nlohmann::json params;
  Tensors expected;
};

Case decode(bool extras) {
  mla::FlashMlaSpec s;
  s.h_q = 4, s.kv_fp8 = true, s.d = 272, s.dv = 256;
  if (extras) s.topk = 40, s.lonely = true, s.topk_length = true, s.sink = true;
  Case c{mla::kFlashMlaLayout, mla::flashmla_inputs(s), mla::flashmla_params(s), {}};
  c.expected = run_oracle(contract(c.layout), c.in, c.params);
  return c;
}

Case prefill() {
  mla::FlashMlaPrefillSpec s;
  s.s_q = 5, s.s_kv = 150, s.topk = 24, s.h_q = 4, s.d = 80, s.dv = 64, s.lonely = true, s.topk_length = true;
  s.sink = true;
  Case c{mla::kFlashMlaSparsePrefillLayout, mla::flashmla_prefill_inputs(s), mla::flashmla_prefill_params(s), {}};
  c.expected = run_oracle(contract(c.layout), c.in, c.params);
  return c;
}

// Every output of the candidate judged; the first that fails names the check.
Outcome judge(std::string name, bool mutant, std::string source, const Case& c, const Tensors& cand) {
  for (const auto& [output, d] : cand) {
    const CheckReport r = check(contract(c.layout), c.in, c.params, c.expected, output, d);
    if (!r.pass) {
      const std::string first = r.failed.empty() ? r.text.substr(0, r.text.find('\n')) : r.failed.front();
      return {std::move(name), mutant, std::move(source), false, output + ": " + first};
    }
  }
  return {std::move(name), mutant, std::move(source), true, "-"};
}

Tensors flash(const Case& c, int64_t split_blocks, FlashMlaBug bug = FlashMlaBug::none) {
  return c.layout == std::string(mla::kFlashMlaLayout) ? mla::flashmla_run_flash(c.in, c.params, split_blocks, bug)
                                                      : mla::flashmla_prefill_run_flash(c.in, c.params, split_blocks, bug);
}

}  // namespace

void flashmla_cases(std::vector<Outcome>& out) {
  const Case fp8 = decode(false);
  for (const int64_t sb : {1, 3})
    out.push_back(judge(fmt::format("FlashMLA FP8 cache: flash_mla, {} page(s) per split", sb), false,
                        "other split counts", fp8, flash(fp8, sb)));
  out.push_back(judge("FlashMLA FP8: scale of the neighbouring 128-group", true, "FP8 record offsets (scales of the "
                      "wrong block)", fp8, flash(fp8, 2, FlashMlaBug::scale_neighbour)));
  out.push_back(judge("FlashMLA FP8: scale divided instead of multiplied", true, "dequantisation as x / s",
                      fp8, flash(fp8, 2, FlashMlaBug::scale_divide)));
  out.push_back(judge("FlashMLA FP8: RoPE part read as FP8", true, "the record's bf16 tail read as E4M3", fp8,
                      flash(fp8, 2, FlashMlaBug::rope_as_fp8)));
  const Case sp = decode(true);  // sparse, FP8, a lonely token, topk_length, attn_sink
  out.push_back(judge("FlashMLA sparse FP8 (lonely, topk_length, sink): flash", false, "the sink merged as a "
                      "split of its own", sp, flash(sp, 1)));
  struct Bug {
    FlashMlaBug bug;
    const char* what;
    const char* source;
  };
  const Bug bugs[] = {
      {FlashMlaBug::lonely_nan, "lonely token: o NaN, lse -inf", "0/0 and log 0 (FlashMLA: o = 0, lse = +inf)"},
      {FlashMlaBug::topk_length_ignored, "topk_length ignored", "all topk entries read"},
      {FlashMlaBug::sink_ignored, "attention sink ignored", "attn_sink dropped from the denominator"},
      {FlashMlaBug::invalid_as_row0, "index -1 read as row 0", "invalid entries clamped, not masked"},
      {FlashMlaBug::dedup, "duplicated index counted once", "indices treated as a set"}};
  for (const Bug& b : bugs)
    out.push_back(judge(fmt::format("FlashMLA sparse: {}", b.what), true, b.source, sp, flash(sp, 1, b.bug)));
  const Case pf = prefill();
  out.push_back(judge("FlashMLA prefill (lonely, topk_length, sink): flash", false, "other split counts", pf,
                      flash(pf, 2)));
  out.push_back(judge("FlashMLA prefill: lonely token: out NaN, lse -inf", true, "0/0 and log 0", pf,
                      flash(pf, 2, FlashMlaBug::lonely_nan)));
}

}  // namespace ladder::mutants
