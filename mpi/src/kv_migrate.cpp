// mpi/src/kv_migrate.cpp -- ladder-kv-migrate: KV-cache migration from prefill ranks to a decode rank
// over MPI, then N decode steps with flash_mla, checked bit for bit against the
// same pipeline in one process (ladder/mpi/kv_pipeline.hpp).
//
//   mpirun -np 3 ladder-kv-migrate [--prompts 1,63,64,65,1000] [--steps 4] [--decode-blocks 64] [--write-link F]
//
// --write-link FILE: the decode rank fits time = latency + bytes / rate over the prompts' migrations
// (least squares, one point per prompt) and writes {"link_GBps", "latency_ms", ...} to FILE as JSON;
// the simulator reads it with "kv_transfer": {"measured": "FILE"} (stage 06's KV-transfer model fed the
// rate measured here).
//
// Ranks 0 .. P-1 are prefill instances (prompt b goes to rank b mod P), rank P is the decode instance.
// Transport: two-sided request/response (MPI_Send / MPI_Irecv), PULL-based as in DistServe: a prefill
// rank only announces a finished prompt (id, length, blocks); the decode rank admits it when its own
// pool has room for the prompt and its decode tokens, allocates its own blocks (its own numbering),
// asks for the prompt's blocks in an order of its choosing (shuffled here, to show that arrival order
// does not matter) and writes each into its own block, rewriting the block table. Only a prompt whose
// every block arrived is admitted; the prefill rank frees its blocks when the decode rank says DONE.
// Why not one-sided MPI_Get: the decode rank would need the prefill rank's block numbering and a window
// over its whole pool, and a dead prefill rank would leave an MPI_Win_unlock that cannot time out;
// with messages every wait is an MPI_Test loop with a deadline that names the peer.
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

#include "ladder/mpi/kv_pipeline.hpp"

namespace {

using namespace ladder;
using namespace ladder::kvmig;
using Clock = std::chrono::steady_clock;

enum Tag : int { kAnnounce = 1, kPull = 2, kBlock = 3, kDone = 4, kStop = 5 };

struct Options {
  PipelineConfig cfg;
  double timeout_s = 20;
  int64_t die_after_blocks = -1;   // test: prefill rank 0 stops answering after sending this many blocks
  int skew_rank = -1;              // test: this rank is given a different configuration (seed + 1)
  bool plant_ignore_order = false; // test: the decode rank ignores the order it asked for (must fail)
  std::string write_link;          // the fitted link model goes to this JSON file (decode rank)
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

int64_t parse_int(const std::string& s, const char* what) {
  require(!s.empty() && s.find_first_not_of("0123456789") == std::string::npos && s.size() <= 9,
          "kv-migrate: {} = '{}' violates a non-negative integer", what, s);
  return std::stoll(s);
}

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
    else if (a == "--timeout") o.timeout_s = static_cast<double>(parse_int(value(), "--timeout"));
    else if (a == "--test-die-after-blocks") o.die_after_blocks = parse_int(value(), "--test-die-after-blocks");
    else if (a == "--test-skew-rank") o.skew_rank = static_cast<int>(parse_int(value(), "--test-skew-rank"));
    else if (a == "--test-plant-ignore-order") o.plant_ignore_order = true;
    else if (a == "--write-link") o.write_link = value();
    else throw Error(fmt::format("kv-migrate: unknown argument '{}' (see the header of mpi/src/kv_migrate.cpp)", a));
  }
  require(o.timeout_s >= 1, "kv-migrate: --timeout = {} violates >= 1 second", o.timeout_s);
  return o;
}

// A receive that cannot hang: MPI_Irecv, then MPI_Test until the deadline; on timeout the request is
// cancelled and the error names the peer and what was awaited.
MPI_Status recv(void* buf, int count, MPI_Datatype type, int source, int tag, double timeout_s,
                const std::string& what) {
  MPI_Request req;
  MPI_Irecv(buf, count, type, source, tag, MPI_COMM_WORLD, &req);
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  int done = 0;
  MPI_Status st;
  while (true) {
    MPI_Test(&req, &done, &st);
    if (done) return st;
    if (Clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  MPI_Cancel(&req);
  MPI_Request_free(&req);
  throw Error(fmt::format("kv-migrate: no {} from {} within {:.0f} s", what,
                          source == MPI_ANY_SOURCE ? std::string("any prefill rank") : fmt::format("rank {}", source),
                          timeout_s));
}

void prefill_rank(const Options& o, int rank, int prefill_ranks, int decode) {
  const PipelineConfig& c = o.cfg;
  const mla::Weights<float> W = model(c);
  int64_t mine = 0;
  for (int64_t b = rank; b < c.prompts(); b += prefill_ranks)
    mine += mla::blocks_for(c.prompt_lens[static_cast<size_t>(b)], c.block_size);
  BlockPool pool(std::max<int64_t>(mine, 1), c.block_size, W.cfg.kv_dim(), c.seed + 100 + static_cast<uint64_t>(rank));
  std::vector<std::vector<int32_t>> held(static_cast<size_t>(c.prompts()));
  // The rank's prompts are one prefill batch: all computed, then announced (so the decode rank's pulls,
  // and the migration time it measures, do not wait on this rank's arithmetic).
  std::vector<std::array<int64_t, 3>> announces;
  for (int64_t b = rank; b < c.prompts(); b += prefill_ranks) {
    const Mat<float> rows = prefill_rows(W, c, b);
    auto& blocks = held[static_cast<size_t>(b)];
    const int64_t n = mla::blocks_for(rows.rows(), c.block_size), kv_dim = rows.cols();
    for (int64_t i = 0; i < n; ++i) blocks.push_back(pool.take());
    for (int64_t j = 0; j < rows.rows(); ++j)
      std::copy(rows.row(j).data(), rows.row(j).data() + kv_dim,
                pool.block(blocks[static_cast<size_t>(j / c.block_size)]) + (j % c.block_size) * kv_dim);
    announces.push_back({b, rows.rows(), n});
  }
  for (const auto& a : announces) MPI_Send(a.data(), 3, MPI_INT64_T, decode, kAnnounce, MPI_COMM_WORLD);
  // Serve PULL requests until STOP. The wait is long: the decode rank admits prompts one at a time.
  int64_t sent = 0;
  std::vector<int64_t> msg(static_cast<size_t>(2 + c.max_blocks()));
  while (true) {
    MPI_Status st =
        recv(msg.data(), static_cast<int>(msg.size()), MPI_INT64_T, decode, MPI_ANY_TAG, 10 * o.timeout_s,
             "PULL, DONE or STOP");
    if (st.MPI_TAG == kStop) return;
    const int64_t b = msg[0];
    require(b >= 0 && b < c.prompts() && static_cast<int>(b % prefill_ranks) == rank,
            "kv-migrate: rank {}: request for prompt {} that this rank does not hold", rank, b);
    auto& blocks = held[static_cast<size_t>(b)];
    if (st.MPI_TAG == kDone) {  // the decode rank holds every block: free ours
      for (int32_t blk : blocks) pool.give_back(blk);
      blocks.clear();
      continue;
    }
    const int64_t n = msg[1];
    require(n == static_cast<int64_t>(blocks.size()), "kv-migrate: rank {}: PULL of {} blocks for prompt {} which has {}",
            rank, n, b, blocks.size());
    // Every block of the request in flight at once (MPI_Isend), then one wait: the transfers overlap
    // instead of paying a rendezvous round trip per block.
    std::vector<MPI_Request> reqs;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t logical = msg[static_cast<size_t>(2 + k)];
      require(logical >= 0 && logical < n, "kv-migrate: rank {}: PULL asks block {} of prompt {} (has {})", rank,
              logical, b, n);
      if (o.die_after_blocks >= 0 && rank == 0 && sent == o.die_after_blocks) {
        MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);  // the half that was sent
        std::fprintf(stderr, "kv-migrate: rank %d: simulated death after sending %lld blocks (test)\n", rank,
                     static_cast<long long>(sent));
        std::this_thread::sleep_for(std::chrono::duration<double>(20 * o.timeout_s));  // killed by the abort
        std::_Exit(3);
      }
      reqs.emplace_back();
      MPI_Isend(pool.block(blocks[static_cast<size_t>(logical)]), static_cast<int>(pool.block_floats()), MPI_FLOAT,
                decode, kBlock, MPI_COMM_WORLD, &reqs.back());
      ++sent;
    }
    MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
  }
}

int decode_rank(const Options& o, int prefill_ranks) {
  const PipelineConfig& c = o.cfg;
  const mla::Weights<float> W = model(c);
  DecodeCache d = make_decode_cache(c, W.cfg.kv_dim(), c.seed + 29);  // not the reference's numbering
  Rng order_rng(c.seed + 4242);
  double migrate_s = 0;
  int64_t migrated_bytes = 0;
  std::vector<std::pair<double, double>> per_prompt;  // (bytes, seconds) of each prompt's migration
  std::vector<int64_t> msg(static_cast<size_t>(2 + c.max_blocks()));
  for (int64_t admitted = 0; admitted < c.prompts(); ++admitted) {
    int64_t announce[3];
    const MPI_Status st = recv(announce, 3, MPI_INT64_T, MPI_ANY_SOURCE, kAnnounce, 10 * o.timeout_s, "ANNOUNCE");
    const int peer = st.MPI_SOURCE;
    const int64_t b = announce[0], L = announce[1], n = announce[2];
    require(b >= 0 && b < c.prompts() && L == c.prompt_lens[static_cast<size_t>(b)] &&
                n == mla::blocks_for(L, c.block_size) && d.lens[static_cast<size_t>(b)] == 0,
            "kv-migrate: rank {} announced prompt {} of {} tokens in {} blocks, which the configuration does not have",
            peer, b, L, n);
    // Admission: room for the prompt AND its decode tokens, before any block is requested.
    require(d.pool.free_blocks() >= c.decode_need(b),
            "kv-migrate: decode rank: prompt {} needs {} blocks, {} free: not admitted", b, c.decode_need(b),
            d.pool.free_blocks());
    auto& own = d.blocks[static_cast<size_t>(b)];
    for (int64_t i = 0; i < c.decode_need(b); ++i) own.push_back(d.pool.take());
    const std::vector<int32_t> order = mla::permutation(n, order_rng);
    msg[0] = b, msg[1] = n;
    for (int64_t k = 0; k < n; ++k) msg[static_cast<size_t>(2 + k)] = order[static_cast<size_t>(k)];
    const auto t0 = Clock::now();
    MPI_Send(msg.data(), static_cast<int>(2 + n), MPI_INT64_T, peer, kPull, MPI_COMM_WORLD);
    // Every block's receive is posted at once, straight into its own block (MPI matches messages of one
    // source and tag in the order they were sent, which is the order asked for), then one deadline.
    std::vector<MPI_Request> reqs(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) {
      const int64_t logical = o.plant_ignore_order ? k : order[static_cast<size_t>(k)];
      MPI_Irecv(d.pool.block(own[static_cast<size_t>(logical)]), static_cast<int>(d.pool.block_floats()), MPI_FLOAT,
                peer, kBlock, MPI_COMM_WORLD, &reqs[static_cast<size_t>(k)]);
    }
    const auto deadline = Clock::now() + std::chrono::duration<double>(o.timeout_s);
    int all = 0;
    for (int64_t polls = 0;; ++polls) {  // spin first (progress for the transfers), then yield the core
      MPI_Testall(static_cast<int>(n), reqs.data(), &all, MPI_STATUSES_IGNORE);
      if (all || Clock::now() > deadline) break;
      if (polls > 100000) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    if (!all) {
      int64_t received = 0;
      for (MPI_Request& r : reqs) {
        int flag = 0;
        if (r == MPI_REQUEST_NULL) {
          ++received;
          continue;
        }
        MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
        if (flag) {
          ++received;
        } else {
          MPI_Cancel(&r);
          MPI_Request_free(&r);
        }
      }
      for (int32_t blk : own) d.pool.give_back(blk);  // nothing of a half-received prompt stays
      own.clear();
      throw Error(fmt::format("kv-migrate: decode rank: no block {} of {} of prompt {} ({} received) from rank {} "
                              "within {:.0f} s; the prompt is not admitted and nothing is decoded",
                              received + 1, n, b, received, peer, o.timeout_s));
    }
    const double took = std::chrono::duration<double>(Clock::now() - t0).count();
    migrate_s += took;
    migrated_bytes += n * d.pool.block_floats() * static_cast<int64_t>(sizeof(float));
    per_prompt.emplace_back(double(n * d.pool.block_floats() * static_cast<int64_t>(sizeof(float))), took);
    d.lens[static_cast<size_t>(b)] = L;  // admitted: every block arrived
    const int64_t done[2] = {b, 0};
    MPI_Send(done, 2, MPI_INT64_T, peer, kDone, MPI_COMM_WORLD);
  }
  for (int r = 0; r < prefill_ranks; ++r) {
    const int64_t stop[2] = {-1, 0};
    MPI_Send(stop, 2, MPI_INT64_T, r, kStop, MPI_COMM_WORLD);
  }
  // A plain memcpy of the same bytes, block by block, in the same run: the migration's yardstick.
  std::vector<float> src(static_cast<size_t>(migrated_bytes / 4)), dst(src.size());
  std::fill(src.begin(), src.end(), 1.0f);
  const auto m0 = Clock::now();
  for (int rep = 0; rep < 5; ++rep)
    for (size_t i = 0; i < src.size(); i += static_cast<size_t>(d.pool.block_floats()))
      std::memcpy(dst.data() + i, src.data() + i,
                  std::min(src.size() - i, static_cast<size_t>(d.pool.block_floats())) * sizeof(float));
  const double memcpy_s = std::chrono::duration<double>(Clock::now() - m0).count() / 5;

  const auto d0 = Clock::now();
  const std::vector<Mat<float>> got = decode(W, c, std::move(d));
  const double decode_s = std::chrono::duration<double>(Clock::now() - d0).count();
  const std::vector<Mat<float>> want = one_process(c);
  bool same = got.size() == want.size();
  for (size_t t = 0; same && t < got.size(); ++t)
    same = got[t].size() == want[t].size() &&
           std::memcmp(got[t].data(), want[t].data(), static_cast<size_t>(got[t].size()) * sizeof(float)) == 0;
  const std::string lens = fmt::format("{}", fmt::join(c.prompt_lens, ","));
  fmt::print("kv-migrate: {} prefill rank(s) -> 1 decode rank; prompts [{}]; block size {}; {} decode steps\n",
             prefill_ranks, lens, c.block_size, c.decode_steps);
  fmt::print("  migrated {} bytes in {:.3f} ms: {:.2f} GB/s (memcpy of the same bytes here: {:.2f} GB/s, {:.1f}x)\n",
             migrated_bytes, migrate_s * 1e3, migrated_bytes / migrate_s / 1e9, migrated_bytes / memcpy_s / 1e9,
             memcpy_s > 0 ? migrate_s / memcpy_s : 0.0);
  fmt::print("  decode {} steps: {:.3f} ms; migration / (migration + decode) = {:.1f}%\n", c.decode_steps,
             decode_s * 1e3, 100 * migrate_s / (migrate_s + decode_s));
  fmt::print("  decode output vs one process: {}\n", same ? "BIT-IDENTICAL" : "DIFFERENT (FAIL)");
  if (!o.write_link.empty()) {
    // Least squares t = a + b * bytes over the prompts; a < 0 (noise) is clamped to 0 and the rate refitted
    // through the origin; one prompt size or b <= 0 falls back to the mean rate with no latency.
    double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (const auto& [x, y] : per_prompt) n += 1, sx += x, sy += y, sxx += x * x, sxy += x * y;
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
  return same ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int rc = 0;
  bool checked = false;  // past the checks every rank makes alike
  try {
    Options o = parse(argc, argv);
    require(size >= 2, "kv-migrate: {} rank(s) violates >= 2 (prefill ranks + one decode rank; mpirun -np N)", size);
    if (rank == o.skew_rank) o.cfg.seed += 1;
    // Every rank must run the same configuration: compare digests before any work.
    const uint64_t mine = o.cfg.digest();
    uint64_t lo = 0, hi = 0;
    MPI_Allreduce(&mine, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&mine, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    require(lo == hi, "kv-migrate: rank {}: the ranks were given different configurations (digest {:016x}; "
            "min {:016x}, max {:016x} over all ranks)", rank, mine, lo, hi);
    validate(o.cfg);
    checked = true;
    if (rank == size - 1) rc = decode_rank(o, size - 1);
    else prefill_rank(o, rank, size - 1, size - 1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ladder-kv-migrate: rank %d: error: %s\n", rank, e.what());
    std::fflush(stderr);
    // A configuration error is seen by every rank alike (checked before any message): each exits.
    // Anything later may leave peers waiting: abort the job, which ends every rank with an error.
    if (!checked) {
      MPI_Finalize();
      return 2;
    }
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Finalize();
  return rc;
}
