// mpi/src/kv_migrate.cpp -- ladder-kv-migrate: KV-cache migration from prefill ranks to a decode rank
// over MPI, then N decode steps with flash_mla, checked bit for bit against the
// same pipeline in one process (ladder/mpi/kv_pipeline.hpp).
//
//   scripts/mpirun -np 3 ladder-kv-migrate [--prompts 1,63,64,65,1000] [--steps 4] [--decode-blocks 64] [--write-link F]
//                                  [--layers 1] [--layer-shards 1] [--decode-shards 1] [--decode-tp 1]
//
// --write-link FILE: the decode rank fits time = latency + bytes / rate over the prompts' migrations
// (least squares, one point per prompt) and writes {"link_GBps", "latency_ms", ...} to FILE as JSON;
// the simulator reads it with "kv_transfer": {"measured": "FILE"} (stage 06's KV-transfer model fed the
// rate measured here). With --decode-shards the points are the last decode stage's own pulls.
//
// --layers L --layer-shards S --decode-shards D: a stack of L MLA layers; the prefill ranks form groups of
// S pipeline stages, each holding its share of the layers and their blocks; the decode instance is D
// pipeline stages (the last D ranks); each decode stage pulls each of its layers' blocks from the prefill
// rank that owns it (DistServe's resharding between differently partitioned instances).
//
// --decode-tp T: each decode stage is T ranks running every layer tensor-parallel (heads split, one
// all-reduce of u per layer; ladder/mpi/tp.hpp, as ladder-serve-demo): the stage's first rank pulls the
// blocks and broadcasts the whole latent cache to the others; the output is checked against one process
// summing the same head shards, and the last stage's TP ranks vote on their u.
//
// Ranks 0 .. P-1 are prefill instances (prompt b goes to group b mod (P/S)), ranks P .. P+D T-1 the decode
// instance. Transport and protocol: ladder/mpi/kv_transport.hpp (pull-based request/response with a
// deadline naming the peer on every wait).
#include <mpi.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "ladder/mpi/decode_tp.hpp"
#include "ladder/mpi/kv_transport.hpp"
#include "ladder/mpi/launch.hpp"

namespace {

using namespace ladder;
using namespace ladder::kvmig;
struct Options {
  PipelineConfig cfg;
  TransportOptions t;
  int skew_rank = -1;              // test: this rank is given a different configuration (seed + 1)
  std::string write_link;          // the fitted link model goes to this JSON file (decode rank)
  bool plant_tp_reverse_sum = false;  // test: TP rank 0 of each decode stage sums the partials in reverse
};

std::vector<int64_t> parse_list(const std::string& s, const char* what) {
  std::vector<int64_t> v;
  size_t i = 0;
  while (i <= s.size()) {
    const size_t j = s.find(',', i);
    const std::string item = s.substr(i, j == std::string::npos ? std::string::npos : j - i);
    require(!item.empty() && item.find_first_not_of("0123456789") == std::string::npos && item.size() <= 9,
            "kv-migrate: {} '{}' violates a comma-separated list of positive integers", what, s);
    v.push_back(std::stoll(item));
    if (j == std::string::npos) break;
    i = j + 1;
  }
  return v;
}

int64_t parse_int(const std::string& s, const char* what) { return ladder::mpi::parse_count(s, "kv-migrate", what); }

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      require(i + 1 < argc, "kv-migrate: {} needs a value", a);
      return argv[++i];
    };
    if (a == "--prompts") o.cfg.prompt_lens = parse_list(value(), "--prompts");
    else if (a == "--steps") o.cfg.decode_steps = parse_int(value(), "--steps");
    else if (a == "--decode-blocks") o.cfg.decode_blocks = parse_int(value(), "--decode-blocks");
    else if (a == "--block-size") o.cfg.block_size = parse_int(value(), "--block-size");
    else if (a == "--seed") o.cfg.seed = static_cast<uint64_t>(parse_int(value(), "--seed"));
    else if (a == "--timeout") o.t.timeout_s = static_cast<double>(parse_int(value(), "--timeout"));
    else if (a == "--test-die-after-blocks") o.t.die_after_blocks = parse_int(value(), "--test-die-after-blocks");
    else if (a == "--test-skew-rank") o.skew_rank = static_cast<int>(parse_int(value(), "--test-skew-rank"));
    else if (a == "--test-plant-ignore-order") o.t.plant_ignore_order = true;
    else if (a == "--test-plant-layer-offset") o.t.plant_layer_offset = true;
    else if (a == "--layers") o.cfg.layers = parse_int(value(), "--layers");
    else if (a == "--layer-shards") o.cfg.layer_shards = parse_int(value(), "--layer-shards");
    else if (a == "--decode-shards") o.cfg.decode_shards = parse_int(value(), "--decode-shards");
    else if (a == "--decode-tp") o.cfg.decode_tp = parse_int(value(), "--decode-tp");
    else if (a == "--test-plant-tp-reverse-sum") o.plant_tp_reverse_sum = true;
    else if (a == "--write-link") o.write_link = value();
    else throw Error(fmt::format("kv-migrate: unknown argument '{}' (--help lists the options)", a));
  }
  require(o.t.timeout_s >= 1, "kv-migrate: --timeout = {} violates >= 1 second", o.t.timeout_s);
  return o;
}

const char* const kUsage =
    "ladder-kv-migrate: KV-cache migration from prefill ranks to the decode instance over MPI, then decode steps\n"
    "with flash_mla, checked bit for bit against the same pipeline in one process.\n"
    "\n"
    "usage: scripts/mpirun -np N build/bin/ladder-kv-migrate [options]     (any N >= 2: N - 1 prefill ranks, 1 decode)\n"
    "  --prompts L1,L2,...  prompt lengths, each 1..1048576 (default 1,63,64,65,1000)\n"
    "  --steps S            decode steps, 1..1024 (default 4)\n"
    "  --block-size B       tokens per KV block, 1..4096 (default 64)\n"
    "  --decode-blocks K    the decode instance's pool in blocks, >= what the prompts need (default 64)\n"
    "  --layers L           MLA layers in the stack, 1..64 (default 1)\n"
    "  --layer-shards S     prefill pipeline stages, a divisor of the prefill ranks, <= L (default 1)\n"
    "  --decode-shards D    decode pipeline stages, <= L; the last D x T ranks decode (default 1)\n"
    "  --decode-tp T        tensor-parallel ranks per decode stage, a divisor of the model's 8 heads (default 1)\n"
    "  --write-link FILE    write the fitted link model (JSON) for the simulator's \"kv_transfer\": {\"measured\"}\n"
    "  --seed X, --timeout S (every wait's deadline in seconds, >= 1; default 20)\n"
    "  --test-*             planted bugs and failures the checks must catch (tests/mpi.cmake)\n"
    "  -h, --help           this text\n"
    "Chapter 06 section 15; the header of mpi/src/kv_migrate.cpp.\n";

// Decode stage k of D, TP rank t of T (rank prefill_ranks + k T + t): the stage's leader (t = 0) pulls its
// layers and broadcasts them to the stage's other TP ranks; every rank decodes them (its heads of each
// layer, then the all-reduce, with --decode-tp), receiving each step's hidden states from stage k - 1 and
// sending its own on to stage k + 1. The last stage's leader reports, after the last stage's TP vote.
int decode_rank(const Options& o, const Layout& lay, DecodeTp& dtp) {
  const PipelineConfig& c = o.cfg;
  const std::vector<mla::Weights<float>> W = model(c);
  const int64_t k = dtp.stage(), tr = dtp.tp_rank();
  const int64_t D = lay.decode_shards, l0 = first_layer(c, D, k), l1 = first_layer(c, D, k + 1);
  Migrated m = dtp.migrate(c, o.t, lay, W[0].cfg.kv_dim());
  const int64_t block_floats = m.caches[0].pool.block_floats();
  StepInput x_in;
  StepOutput pass_on;
  if (k > 0)
    x_in = [&](int64_t t) {
      Mat<float> x(c.prompts(), W[0].cfg.hidden);
      recv(x.data(), static_cast<int>(x.size()), MPI_FLOAT, lay.decode_rank(k - 1, tr), kActivation,
           10 * o.t.timeout_s, fmt::format("hidden states of decode step {} at layer {}", t, l0));
      return x;
    };
  if (k + 1 < D)
    pass_on = [&](int64_t t, const Mat<float>& x) {
      send(x.data(), static_cast<int>(x.size()), MPI_FLOAT, lay.decode_rank(k + 1, tr), kActivation,
           10 * o.t.timeout_s, fmt::format("hidden states of decode step {} at layer {}", t, l1));
    };
  const auto d0 = Clock::now();
  const std::vector<Mat<float>> got =
      decode_layers(W, c, l0, l1, std::move(m.caches), x_in, pass_on, dtp.attend(W, l0, l1, o.plant_tp_reverse_sum));
  const double decode_s = std::chrono::duration<double>(Clock::now() - d0).count();
  const bool tp_same = k + 1 < D || dtp.vote(got);  // the last stage's TP ranks hold the same u
  if (tr > 0) return 0;  // the stage's leader reports
  // The migration of every decode stage, summed (bytes) and the slowest (time), on the last stage.
  double migrate_s = m.seconds;
  int64_t migrated_bytes = m.bytes;
  if (k + 1 < D) {
    const double report[2] = {m.seconds, double(m.bytes)};
    send(report, 2, MPI_DOUBLE, lay.decode_rank(D - 1), kReport, 10 * o.t.timeout_s, "the migration report");
    return 0;
  }
  for (int64_t k2 = 0; k2 + 1 < D; ++k2) {
    double report[2];
    recv(report, 2, MPI_DOUBLE, lay.decode_rank(k2), kReport, 10 * o.t.timeout_s, "the migration report");
    migrate_s = std::max(migrate_s, report[0]);
    migrated_bytes += static_cast<int64_t>(report[1]);
  }
  const int prefill_ranks = lay.prefill_ranks;
  // A plain memcpy of the same bytes, block by block, in the same run: the migration's yardstick.
  std::vector<float> src(static_cast<size_t>(migrated_bytes / 4)), dst(src.size());
  std::fill(src.begin(), src.end(), 1.0f);
  const auto m0 = Clock::now();
  for (int rep = 0; rep < 5; ++rep)
    for (size_t i = 0; i < src.size(); i += static_cast<size_t>(block_floats))
      std::memcpy(dst.data() + i, src.data() + i,
                  std::min(src.size() - i, static_cast<size_t>(block_floats)) * sizeof(float));
  const double memcpy_s = std::chrono::duration<double>(Clock::now() - m0).count() / 5;

  const std::vector<Mat<float>> want = one_process(c);
  bool same = got.size() == want.size();
  for (size_t t = 0; same && t < got.size(); ++t)
    same = got[t].size() == want[t].size() &&
           std::memcmp(got[t].data(), want[t].data(), static_cast<size_t>(got[t].size()) * sizeof(float)) == 0;
  const std::string lens = fmt::format("{}", fmt::join(c.prompt_lens, ","));
  fmt::print("kv-migrate: {} prefill rank(s) -> {} decode rank(s); prompts [{}]; block size {}; {} decode steps\n",
             prefill_ranks, lay.decode_ranks(), lens, c.block_size, c.decode_steps);
  if (c.layers > 1)
    fmt::print("  {} layers; prefill: {} group(s) of {} pipeline stage(s), decode: {} pipeline stage(s) (resharded: "
               "each layer's blocks pulled from the rank that owns it)\n", c.layers, lay.groups(), lay.shards, D);
  fmt::print("  migrated {} bytes in {:.3f} ms: {:.2f} GB/s (memcpy of the same bytes here: {:.2f} GB/s, {:.1f}x)\n",
             migrated_bytes, migrate_s * 1e3, migrated_bytes / migrate_s / 1e9, migrated_bytes / memcpy_s / 1e9,
             memcpy_s > 0 ? migrate_s / memcpy_s : 0.0);
  fmt::print("  decode {} steps: {:.3f} ms; migration / (migration + decode) = {:.1f}%\n", c.decode_steps,
             decode_s * 1e3, 100 * migrate_s / (migrate_s + decode_s));
  if (dtp.tp() > 1) {
    const int64_t H = W[0].cfg.n_heads;
    fmt::print("  decode TP: {} ranks per stage ({} of the {} heads each); the cache broadcast from this stage's "
               "first rank to its {} other(s) {:.3f} ms ({} bytes sent), the all-reduces {:.3f} ms of the decode\n",
               dtp.tp(), H / dtp.tp(), H, dtp.tp() - 1, dtp.share_s * 1e3, dtp.shared_bytes, dtp.allreduce_s * 1e3);
    fmt::print("  TP ranks of the last decode stage hold the same u (a vote over its {} ranks): {}\n", dtp.tp(),
               tp_same ? "SAME" : "DIFFERENT (FAIL)");
  }
  fmt::print("  decode output vs one process: {}\n", same ? "BIT-IDENTICAL" : "DIFFERENT (FAIL)");
  if (!o.write_link.empty()) {
    // Least squares t = a + b * bytes over the prompts; a < 0 (noise) is clamped to 0 and the rate refitted
    // through the origin; one prompt size or b <= 0 falls back to the mean rate with no latency.
    double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (const auto& [x, y] : m.per_prompt) n += 1, sx += x, sy += y, sxx += x * x, sxy += x * y;
    const double den = n * sxx - sx * sx;
    double b = den > 0 ? (n * sxy - sx * sy) / den : 0, a = n > 0 ? (sy - b * sx) / n : 0;
    if (a < 0 || b <= 0) a = 0, b = sxx > 0 ? sxy / sxx : 0;
    if (b <= 0) b = migrate_s / double(migrated_bytes);
    nlohmann::json j = {{"about", "KV-cache migration measured by ladder-kv-migrate over MPI on one machine: "
                                  "time = latency + bytes / rate, least squares over the prompts"},
                        {"link_GBps", 1.0 / b / 1e9},
                        {"latency_ms", a * 1e3},
                        {"prompts", c.prompt_lens},
                        {"block_size", c.block_size},
                        {"migrated_bytes", migrated_bytes},
                        {"migrate_ms", migrate_s * 1e3},
                        {"memcpy_GBps", memcpy_s > 0 ? double(migrated_bytes) / memcpy_s / 1e9 : 0.0},
                        {"prefill_ranks", prefill_ranks}};
    std::FILE* f = std::fopen(o.write_link.c_str(), "w");
    require(f != nullptr, "kv-migrate: --write-link '{}' violates a writable file path", o.write_link);
    const std::string text = j.dump(2) + "\n";
    const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    std::fclose(f);
    require(ok, "kv-migrate: --write-link '{}': write failed", o.write_link);
    fmt::print("  link model written to {}: {:.3f} GB/s, latency {:.3f} ms (use: \"kv_transfer\": {{\"measured\": "
               "\"{}\"}})\n", o.write_link, 1.0 / b / 1e9, a * 1e3, o.write_link);
  }
  return same && tp_same ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return ladder::mpi::run_ranks(
      argc, argv, "ladder-kv-migrate", kUsage,
      [&](int rank, int size, uint64_t& digest) {
        Options o = parse(argc, argv);
        require(size >= 2, "kv-migrate: {} rank(s) violates >= 2 (prefill ranks + one decode rank; mpirun -np N)",
                size);
        if (rank == o.skew_rank) o.cfg.seed += 1;
        digest = o.cfg.digest();
        validate(o.cfg);
        make_layout(o.cfg, size);
        return o;
      },
      [&](const Options& o, int rank, int size) {
        const Layout lay = make_layout(o.cfg, size);
        const comm::Group world = comm::Group::world(10 * o.t.timeout_s);
        DecodeTp dtp(lay, rank, world);  // every rank: the TP groups' split is collective
        int rc = 0;
        if (dtp.decoding()) rc = decode_rank(o, lay, dtp);
        else prefill_serve(o.cfg, o.t, rank, lay);
        return rc;
      });
}
