// mpi/src/tp_mla.cpp -- ladder-tp-mla: one MLA decode step (stage 03) tensor-parallel over N ranks, the heads
// split across them.
//
//   scripts/mpirun -np N ladder-tp-mla [--prompts 1,63,64,65,300] [--heads H] [--rung A_CC_ME] [--timeout S]
//   (--heads: by default the smallest multiple of N that is >= 8; --help prints the usage)
//
// Tensor parallelism of attention as Megatron-LM does it (Shoeybi et al. 2019, §3; the shards and the
// all-reduce are ladder/mpi/tp.hpp, which ladder-serve-demo --decode-tp shares): the heads are split over the
// ranks, the output projection's input columns with them, and one all-reduce after it. Rank r holds heads
// [r H/N, (r + 1) H/N): its rows of W_UQ, W_QR and kv_b (W_UK, W_UV) and its columns of W_O. W_DQ, W_DKV and
// the norms are replicated, and so is the compressed cache: MLA's c^KV and k^R rows serve every head, so under
// TP each card holds the whole latent cache where MHA's per-head K and V would be divided by t
// (chapter 06 §10). A rank's shard is itself an MLA layer with H/N heads, so every stage-03 rung decodes it
// unchanged, and its output u_r = W_O[:, its heads] o_r is one partial sum of u. The all-reduce:
// an all-gather of the partials, then every rank adds them in rank order (u_0 + u_1 + ... : the result does
// not depend on the MPI library's reduction tree). Bytes are counted at the call: each rank sends its partial
// [B, hidden] to the N - 1 others.
// Checked and printed: u on every rank is BIT-IDENTICAL to the same shards decoded and summed in one
// process (the communication is right), and u is within the stage's tolerance rule (the forward rule,
// k = 2, 4 ulp floor, core/compare.hpp; the README's oracle section) of the fp64 oracle, CD on the whole
// layer (the split is right).
// Planted bugs (tests): --test-plant-shifted-wo, each rank takes the next rank's columns of W_O, which the
// one-process emulation repeats, so only the oracle check can catch it -- and must; --test-plant-reverse-sum,
// the ranks add the partials in reverse order: still within the tolerance of the oracle, so only the
// bit-identity check can catch it -- and must (a sum in any other order is a different rounding).
#include <mpi.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "ladder/core/compare.hpp"
#include "ladder/03-mla/mla.hpp"
#include "ladder/mpi/comm.hpp"
#include "ladder/mpi/launch.hpp"
#include "ladder/mpi/tp.hpp"

namespace {

using namespace ladder;
using namespace ladder::mla;

struct Options {
  std::vector<int64_t> prompts{1, 63, 64, 65, 300};
  int64_t heads = 0;  // 0: the default, the smallest multiple of the rank count >= 8
  std::string rung = "A_CC_ME";
  double timeout_s = 60;
  bool plant_shifted_wo = false;
  bool plant_reverse_sum = false;
  uint64_t seed = 7;
};

int64_t parse_int(const std::string& s, const char* what) { return ladder::mpi::parse_count(s, "tp-mla", what); }

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      require(i + 1 < argc, "tp-mla: {} needs a value", a);
      return argv[++i];
    };
    if (a == "--prompts") {
      o.prompts.clear();
      const std::string v = value();
      for (size_t p = 0; p <= v.size();) {
        const size_t q = std::min(v.find(',', p), v.size());
        o.prompts.push_back(parse_int(v.substr(p, q - p), "--prompts"));
        p = q + 1;
      }
    } else if (a == "--heads") o.heads = ladder::mpi::parse_positive(value(), "tp-mla", "--heads");
    else if (a == "--rung") o.rung = value();
    else if (a == "--timeout") o.timeout_s = static_cast<double>(parse_int(value(), "--timeout"));
    else if (a == "--test-plant-shifted-wo") o.plant_shifted_wo = true;
    else if (a == "--test-plant-reverse-sum") o.plant_reverse_sum = true;
    else throw Error(fmt::format("tp-mla: unknown argument '{}' (--help lists the options)", a));
  }
  for (int64_t L : o.prompts) require(L >= 1, "tp-mla: --prompts has a length {}, violates >= 1", L);
  require(o.timeout_s >= 1, "tp-mla: --timeout = {} violates >= 1 second", o.timeout_s);
  return o;
}

// The stage-03 reference rung of that id (the registry's ids).
Variant variant_of(const std::string& id) {
  const std::pair<const char*, Variant> ids[] = {{"CD", Variant::CD},           {"CC", Variant::CC},
                                                 {"A_CC", Variant::A_CC},       {"A_CC_ME", Variant::A_CC_ME},
                                                 {"AM", Variant::AM},           {"flash_mla", Variant::flash_mla}};
  for (const auto& [name, v] : ids)
    if (id == name) return v;
  throw Error(fmt::format("tp-mla: --rung '{}' violates one of CD, CC, A_CC, A_CC_ME, AM, flash_mla", id));
}

const char* const kUsage =
    "ladder-tp-mla: one MLA decode step (stage 03) tensor-parallel over the ranks: the heads split, one all-reduce;\n"
    "u checked bit for bit against the same shards in one process and against the fp64 oracle of the whole layer.\n"
    "\n"
    "usage: scripts/mpirun -np N build/bin/ladder-tp-mla [options]     (any N >= 1)\n"
    "  --prompts L1,L2,...  context lengths of the batch, each >= 1 (default 1,63,64,65,300)\n"
    "  --heads H            attention heads, a multiple of N (default: the smallest multiple of N >= 8)\n"
    "  --rung R             stage 03 rung decoding each shard: CD, CC, A_CC, A_CC_ME, AM, flash_mla (default A_CC_ME)\n"
    "  --timeout S          every collective's deadline in seconds, >= 1 (default 60)\n"
    "  --test-plant-shifted-wo, --test-plant-reverse-sum   planted bugs the checks must catch (tests)\n"
    "  -h, --help           this text\n"
    "Chapter 06 section 15; the header of mpi/src/tp_mla.cpp.\n";

// Every check of the arguments against the rank count, local to the rank (run_ranks shares the verdict).
Options setup(int argc, char** argv, int N) {
  Options o = parse(argc, argv);
  if (o.heads == 0) o.heads = ladder::mpi::round_up_multiple(8, N);
  Config cfg = small_config();
  cfg.n_heads = o.heads;
  check_config(cfg, "tp-mla");
  require(o.heads % N == 0, "tp-mla: --heads = {} violates a multiple of the rank count {} (every rank holds H/N heads)",
          o.heads, N);
  variant_of(o.rung);
  return o;
}

int tp_main(const Options& o, int rank, int N) {
  Config cfg = small_config();
  cfg.n_heads = o.heads;
  const RungImpl<float> f = reference_rung<float>(variant_of(o.rung));
  const Weights<float> W = random_weights(cfg, o.seed);
  const Inputs in = make_inputs(W, InputSpec{o.prompts, o.seed + 1, true, 1, true});
  const int64_t Hr = o.heads / N, B = static_cast<int64_t>(o.prompts.size()), D = cfg.hidden;
  auto shard = [&](int q) {
    const int64_t w0 = o.plant_shifted_wo ? ((q + 1) % N) * Hr : q * Hr;
    return tp::head_shard(W, q * Hr, (q + 1) * Hr, w0);
  };
  auto partial = [&](int q) {  // u_q: rank q's heads decoded, [B, hidden]
    const Weights<float> Wq = shard(q);
    return mla::run(f, Wq, in.cache, in.step).u;
  };
  // TP: this rank's heads, then the all-reduce of the partials.
  const auto t0 = std::chrono::steady_clock::now();
  const Mat<float> mine = partial(rank);
  const comm::Group world = comm::Group::world(o.timeout_s);
  const Mat<float> u = tp::allreduce_in_rank_order(mine, world, "the partial outputs' all-gather", o.plant_reverse_sum);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int64_t sent = int64_t{N - 1} * B * D * static_cast<int64_t>(sizeof(float));

  // The same shards in one process, summed in the same order: the bits u must have.
  std::vector<Mat<float>> local;
  for (int q = 0; q < N; ++q) local.push_back(partial(q));
  const Mat<float> want = tp::emulate_in_rank_order(local);
  const bool same = std::memcmp(u.data(), want.data(), sizeof(float) * static_cast<size_t>(B * D)) == 0;
  int all_same = same ? 1 : 0, every = 0;
  world.allreduce(&all_same, &every, 1, comm::Op::min, "the bit-identity vote");
  if (rank != 0) return every && same ? 0 : 1;

  // The whole layer: fp64 oracle (CD) and the fp32 baseline (CD) of the tolerance rule.
  const Weights<double> W64 = W.cast<double>();
  const Output<double> oracle_out = oracle(W64, cast_cache<double>(in.cache), cast_step<double>(in.step));
  const Output<float> base = mla::run(reference_rung<float>(Variant::CD), W, in.cache, in.step);
  auto arr = [](const auto& m) {
    using T = typename std::decay_t<decltype(m)>::Scalar;
    Array<T> a({m.rows(), m.cols()});
    a.mat() = m;
    return a;
  };
  const CompareReport rep = compare(arr(oracle_out.u), arr(u), arr(base.u), Tolerance{});
  fmt::print("tp-mla: {} ranks, {} heads ({} per rank), rung {}, batch {} (prompts {}), hidden {}\n", N, o.heads, Hr,
             o.rung, B, fmt::join(o.prompts, ","), D);
  fmt::print("  decode step with TP {:.3f} ms on rank 0; all-reduce of u: {} bytes sent per rank ({} x [{}, {}] fp32)\n",
             seconds * 1e3, sent, N - 1, B, D);
  int64_t tokens = 0;
  for (int64_t L : o.prompts) tokens += L;
  fmt::print("  latent cache per rank: {} bytes ({} tokens x {} fp32), the whole cache on every rank: MLA's c^KV and\n"
             "  k^R rows serve every head\n",
             tokens * cfg.kv_dim() * static_cast<int64_t>(sizeof(float)), tokens, cfg.kv_dim());
  fmt::print("  u vs the fp64 oracle (CD, whole layer): max abs err {:.3g}, tolerance {:.3g}: {}\n", rep.max_abs_err,
             rep.tol, rep.pass ? "PASS" : "FAIL (" + rep.failure + ")");
  fmt::print("  u on every rank vs the same shards summed in one process: {}\n",
             every ? "BIT-IDENTICAL" : "DIFFERENT (FAIL)");
  return every && rep.pass ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return ladder::mpi::run_ranks(
      argc, argv, "ladder-tp-mla", kUsage,
      [&](int, int size, uint64_t& digest) {
        const Options o = setup(argc, argv, size);
        digest = static_cast<uint64_t>(o.heads) * 0x9e3779b97f4a7c15ull ^ (o.plant_shifted_wo ? 1u : 0u) ^
                 (o.plant_reverse_sum ? 2u : 0u);
        for (int64_t L : o.prompts) digest = digest * 1099511628211ull ^ static_cast<uint64_t>(L);
        for (char ch : o.rung) digest = digest * 1099511628211ull ^ static_cast<uint64_t>(ch);
        return o;
      },
      [&](const Options& o, int rank, int size) { return tp_main(o, rank, size); });
}
