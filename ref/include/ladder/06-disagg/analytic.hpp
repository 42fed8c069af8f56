// ladder/06-disagg/analytic.hpp -- stage 06: the closed forms the simulator and the papers rest on.
//
//   06 disagg   step-time model -> event simulator -> KV-cache migration   (checks beside the rungs)
//
// M/D/1 (the lecture notes Sec. 2; DistServe Sec. 3.1): one prefill worker, Poisson arrivals at rate R, every
// request served alone in D seconds: mean TTFT = D + R D^2 / (2 (1 - R D))  (Pollaczek-Khinchine with
// zero service variance), valid for utilisation R D < 1.
// The deployment identities are arithmetic on the reports' own numbers; `ladder reproduce 06-disagg`
// prints them beside the printed values.
#pragma once
#include "ladder/core/error.hpp"

namespace ladder::disagg {

inline double md1_mean_ttft(double rate, double service) {
  require(rate > 0 && service > 0, "md1: rate = {}, service = {} violate > 0", rate, service);
  require(rate * service < 1, "md1: utilisation R D = {} violates R D < 1 (the queue grows without bound)",
          rate * service);
  return service + rate * service * service / (2 * (1 - rate * service));
}

// Huawei A2 decode (the Huawei report Sec. 7.1): per-card concurrency 72, one MTP draft token accepted with
// probability p: each step emits 1 + p tokens per request. tokens/s/card = 72 (1 + p) / T_step;
// TPOT = T_step / (1 + p).
inline double mtp_tokens_per_s(double concurrency, double accept, double step_s) {
  return concurrency * (1 + accept) / step_s;
}
inline double mtp_tpot_s(double accept, double step_s) { return step_s / (1 + accept); }

// Huawei A2 prefill (the Huawei report Sec. 7.1.2): 16384 tokens in 0.631 s on 16 cards.
inline double prefill_tokens_per_s_per_card(double tokens, double seconds, double cards) {
  return tokens / seconds / cards;
}

// MLA KV bytes per token over the layers: (kv_lora + rope) x layers x bytes.
inline double mla_kv_bytes_per_token(double kv_lora, double rope, double layers, double elem_bytes) {
  return (kv_lora + rope) * layers * elem_bytes;
}

// DeepSeek day-6 (open-infra day 6): nodes = daily tokens / 86400 / per-node tokens/s.
inline double nodes_needed(double tokens_per_day, double tokens_per_s_per_node) {
  return tokens_per_day / 86400.0 / tokens_per_s_per_node;
}

// JAX deepseek-r1 on v5e-64 (the JAX DeepSeek-R1 README): HBM utilisation = bytes per token x tok/s / (chips x GB/s).
inline double hbm_utilisation(double bytes_per_token_GB, double tok_s, double chips, double chip_GBps) {
  return bytes_per_token_GB * tok_s / (chips * chip_GBps);
}

}  // namespace ladder::disagg
