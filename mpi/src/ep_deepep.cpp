// mpi/src/ep_deepep.cpp -- ladder-ep-moe --deepep normal|low_latency --case CASE --out DIR: DeepEP's dispatch and
// combine (ladder/04-moe/deepep.hpp: the facts from DeepEP's buffer.py and tests, and ladder's layout of them) run
// across MPI ranks, one MPI rank per EP rank of a case from `ladder deepep write` (the oracle and this run read the
// same inputs). Rank r takes x[r], topk_idx[r], topk_weights[r]; it holds experts [r L, (r + 1) L).
//   normal       get_dispatch_layout on the rank's own tokens (num_tokens_per_rank, is_token_in_rank,
//                num_tokens_per_expert); dispatch: the token counts exchanged with an all-to-all, then each token
//                sent ONCE to every rank one of its experts lives on (all-to-allv of the float32 row, its global
//                topk_idx and weights and its source id rank * T + token); the receiver keeps them in arrival order
//                (source rank ascending, token ascending), turns topk_idx into local indices (-1 where the expert
//                lives elsewhere) and counts num_recv_tokens_per_expert; the stand-in experts give
//                y = sum_{j local} w_j expert_scale[e_j] x (float32, the expert computation applying the weights);
//                combine: the y rows go back along the reversed counts and the source adds them WITHOUT weights.
//   low_latency  each token cast ONCE to E4M3 with one float scale per 128 channels (stage 07's 1 x 128 quantiser,
//                core/quant.hpp: scale amax / 448), then one message per (token, expert): the H code bytes, H / 128
//                scales, source id and local expert, all-to-allv to the expert's rank; the receiver packs each local
//                expert's messages at the front of its [R M] rows (recv_count of them, recv_src -1 after) and
//                decodes the codes to float32 values for recv_x; the expert's y = expert_scale[e] (value * scale)
//                goes back and the source reduces WITH the weights, in top-k order (low_latency_combine).
// Each rank's buffers (padded as the layout says) are gathered onto rank 0, which writes DIR/NAME.npy for every
// output of the layout and judges them by its contract in process (deepep_check, the same as `ladder check
// 04-moe/deepep_MODE CASE DIR --output ...`). Planted bugs (tests/mpi.cmake): --test-plant-next-rank sends every
// dispatch to the rank after the expert's; --test-plant-drop-scale (low latency) drops the scale on receipt.
#include "ladder/mpi/ep_deepep.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <vector>

#include "ladder/04-moe/deepep.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/npy.hpp"
#include "ladder/core/quant.hpp"
#include "ladder/mpi/comm.hpp"

namespace ladder::ep {
namespace {

namespace fs = std::filesystem;
using I = int64_t;

// The case as one rank sees it: every rank's inputs (small), validated as far as this run relies on them.
struct DeepEpCase {
  CaseFolder cf;
  I R = 0, T = 0, H = 0, K = 0, E = 0, L = 0, M = 0;
  Array<float> x, w;
  std::vector<int64_t> idx;
  std::vector<float> scale;
};

DeepEpCase read_deepep_case(const DeepEpOptions& o) {
  const std::string layout = deepep_layout(o.mode), who = "ep-moe --deepep " + o.mode;
  require(fs::is_regular_file(fs::path(o.case_dir) / "case.json"), "{}: --case {} has no case.json (write one with "
          "`ladder deepep write --mode {} --out DIR`)", who, o.case_dir, o.mode);
  {
    std::ifstream f(fs::path(o.case_dir) / "case.json");
    const nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
    const std::string stage = j.is_object() && j.contains("stage") && j["stage"].is_string() ? j["stage"].get<std::string>() : "";
    require(stage == layout, "{}: --case {} is a case of '{}', violates the layout {} of --deepep {}", who, o.case_dir,
            stage, layout, o.mode);
  }
  DeepEpCase c;
  c.cf = read_case(contract(layout), o.case_dir);
  auto input = [&](const char* name) -> const NpyData& {
    require(c.cf.inputs.count(name), "{}: --case {} has no input {}", who, o.case_dir, name);
    return c.cf.inputs.at(name);
  };
  auto param = [&](const char* name) {
    require(c.cf.params.contains(name) && c.cf.params[name].is_number_integer() && c.cf.params[name].get<I>() >= 1,
            "{}: --case {}: param {} violates an integer >= 1", who, o.case_dir, name);
    return c.cf.params[name].get<I>();
  };
  c.R = param("num_ranks"), c.E = param("num_experts");
  require(c.E % c.R == 0, "{}: param num_experts = {} violates a multiple of num_ranks = {}", who, c.E, c.R);
  c.L = c.E / c.R;
  c.x = from_npy<float>(input("x"), "input x");
  require(c.x.shape.size() == 3 && c.x.shape[0] == c.R, "{}: input x has shape {}, violates [num_ranks = {}, T, H]",
          who, shape_str(c.x.shape), c.R);
  c.T = c.x.shape[1], c.H = c.x.shape[2];
  const Array<int64_t> idx = npy_as_int64(input("topk_idx"), "input topk_idx");
  require(idx.shape.size() == 3 && idx.shape[0] == c.R && idx.shape[1] == c.T, "{}: input topk_idx has shape {}, "
          "violates [num_ranks, num_tokens, num_topk]", who, shape_str(idx.shape));
  c.K = idx.shape[2], c.idx = idx.data;
  for (size_t i = 0; i < c.idx.size(); ++i)
    require(c.idx[i] >= -1 && c.idx[i] < c.E, "{}: input topk_idx[{}] = {} violates -1 <= topk_idx < num_experts = {}",
            who, i, c.idx[i], c.E);
  c.w = from_npy<float>(input("topk_weights"), "input topk_weights");
  require(c.w.shape == idx.shape, "{}: input topk_weights has shape {}, violates topk_idx's {}", who,
          shape_str(c.w.shape), shape_str(idx.shape));
  const Array<float> s = from_npy<float>(input("expert_scale"), "input expert_scale");
  require(s.shape == Shape{c.E}, "{}: input expert_scale has shape {}, violates [num_experts = {}]", who,
          shape_str(s.shape), c.E);
  c.scale = s.data;
  if (o.mode == "low_latency") {
    c.M = param("num_max_dispatch_tokens_per_rank");
    require(c.M >= c.T, "{}: param num_max_dispatch_tokens_per_rank = {} violates >= num_tokens = {}", who, c.M, c.T);
    require(c.H % 128 == 0, "{}: input x has hidden = {}, violates a multiple of 128", who, c.H);
  }
  return c;
}

// Counts (in messages) -> element counts and displacements for an all-to-allv of `per` elements per message.
struct Counts {
  std::vector<int> n, displ;
};
Counts scaled(const std::vector<int>& msgs, I per) {
  Counts c{std::vector<int>(msgs.size()), std::vector<int>(msgs.size())};
  int at = 0;
  for (size_t p = 0; p < msgs.size(); ++p) c.n[p] = static_cast<int>(msgs[p] * per), c.displ[p] = at, at += c.n[p];
  return c;
}

template <class T>
void exchange(const comm::Group& g, const std::vector<T>& send, const std::vector<int>& smsg, std::vector<T>& recv,
              const std::vector<int>& rmsg, I per, const std::string& what) {
  const Counts s = scaled(smsg, per), r = scaled(rmsg, per);
  recv.assign(static_cast<size_t>(std::accumulate(r.n.begin(), r.n.end(), I{0})), T{});
  g.alltoallv(send.data(), s.n, s.displ, recv.data(), r.n, r.displ, what);
}

// One output of the candidate: this rank's part gathered onto rank 0 as [R, shape...].
struct Gathered {
  Tensors out;
  template <class T>
  void add(const comm::Group& g, int rank, const std::string& name, const std::vector<T>& mine, Shape shape) {
    std::vector<T> all(rank == 0 ? mine.size() * static_cast<size_t>(g.size()) : 0);
    g.gather(mine.data(), static_cast<int>(mine.size()), all.data(), 0, "the gather of " + name);
    if (rank != 0) return;
    shape.insert(shape.begin(), g.size());
    Array<T> a(shape);
    a.data = std::move(all);
    out[name] = to_npy(a);
  }
};

Gathered normal_mode(const DeepEpOptions& o, const DeepEpCase& c, const comm::Group& world, int r, I& sent) {
  const I R = c.R, T = c.T, H = c.H, K = c.K, L = c.L, N = R * T;
  const float* x = &c.x.data[r * T * H];
  const int64_t* idx = &c.idx[static_cast<size_t>(r * T * K)];
  const float* w = &c.w.data[r * T * K];
  // get_dispatch_layout, on this rank's tokens.
  std::vector<int> per_rank(static_cast<size_t>(R), 0), in_rank(static_cast<size_t>(T * R), 0), per_expert(static_cast<size_t>(c.E), 0);
  for (I t = 0; t < T; ++t)
    for (I j = 0; j < K; ++j)
      if (const I e = idx[t * K + j]; e >= 0) {
        ++per_expert[static_cast<size_t>(e)];
        if (!in_rank[static_cast<size_t>(t * R + e / L)]) in_rank[static_cast<size_t>(t * R + e / L)] = 1, ++per_rank[static_cast<size_t>(e / L)];
      }
  // Dispatch: to each destination its tokens, ascending.
  std::vector<int> smsg(static_cast<size_t>(R), 0), rmsg(static_cast<size_t>(R));
  std::vector<float> sx, sw;
  std::vector<int64_t> sidx;
  std::vector<int> ssrc, order;  // order: the token of each message, in send order
  for (I d = 0; d < R; ++d)
    for (I t = 0; t < T; ++t) {
      const I to = o.plant_next_rank ? (d + R - 1) % R : d;  // planted: what was meant for rank d - 1 goes to d
      if (!in_rank[static_cast<size_t>(t * R + to)]) continue;
      ++smsg[static_cast<size_t>(d)], order.push_back(static_cast<int>(t));
      sx.insert(sx.end(), x + t * H, x + (t + 1) * H);
      sidx.insert(sidx.end(), idx + t * K, idx + (t + 1) * K);
      sw.insert(sw.end(), w + t * K, w + (t + 1) * K);
      ssrc.push_back(static_cast<int>(r * T + t));
    }
  world.alltoall(smsg.data(), 1, rmsg.data(), "the dispatch counts' all-to-all");
  std::vector<float> rx, rw;
  std::vector<int64_t> ridx;
  std::vector<int> rsrc;
  exchange(world, sx, smsg, rx, rmsg, H, "the dispatch of x (all-to-allv)");
  exchange(world, sidx, smsg, ridx, rmsg, K, "the dispatch of topk_idx (all-to-allv)");
  exchange(world, sw, smsg, rw, rmsg, K, "the dispatch of topk_weights (all-to-allv)");
  exchange(world, ssrc, smsg, rsrc, rmsg, 1, "the dispatch of the source ids (all-to-allv)");
  sent = static_cast<I>(sx.size() * 4 + sidx.size() * 8 + sw.size() * 4 + ssrc.size() * 4);
  // The receive buffers, padded to N = R T rows; the experts' outputs y (weights applied).
  const I n = static_cast<I>(rsrc.size());
  std::vector<int> nrecv{static_cast<int>(n)}, nrecv_e(static_cast<size_t>(L), 0), src(static_cast<size_t>(N), -1);
  std::vector<float> bx(static_cast<size_t>(N * H), 0.0f), bw(static_cast<size_t>(N * K), 0.0f), y(static_cast<size_t>(n * H), 0.0f);
  std::vector<int64_t> bidx(static_cast<size_t>(N * K), -1);
  for (I i = 0; i < n; ++i) {
    src[static_cast<size_t>(i)] = rsrc[static_cast<size_t>(i)];
    std::copy_n(&rx[static_cast<size_t>(i * H)], H, &bx[static_cast<size_t>(i * H)]);
    for (I j = 0; j < K; ++j) {
      const I e = ridx[static_cast<size_t>(i * K + j)];
      if (e < 0 || e / L != r) continue;  // DeepEP's tests: local index, -1 where the expert lives elsewhere
      bidx[static_cast<size_t>(i * K + j)] = e - r * L, bw[static_cast<size_t>(i * K + j)] = rw[static_cast<size_t>(i * K + j)];
      ++nrecv_e[static_cast<size_t>(e - r * L)];
      for (I h = 0; h < H; ++h)
        y[static_cast<size_t>(i * H + h)] += rw[static_cast<size_t>(i * K + j)] * (c.scale[static_cast<size_t>(e)] * rx[static_cast<size_t>(i * H + h)]);
    }
  }
  // Combine: y back along the reversed counts; the source adds each rank's row without weights, rank ascending.
  std::vector<float> back, comb(static_cast<size_t>(T * H), 0.0f);
  exchange(world, y, rmsg, back, smsg, H, "the combine (all-to-allv)");
  for (size_t m = 0; m < order.size(); ++m)
    for (I h = 0; h < H; ++h) comb[static_cast<size_t>(order[m] * H + h)] += back[m * static_cast<size_t>(H) + static_cast<size_t>(h)];
  Gathered g;
  g.add(world, r, "num_tokens_per_rank", per_rank, {R});
  g.add(world, r, "is_token_in_rank", in_rank, {T, R});
  g.add(world, r, "num_tokens_per_expert", per_expert, {c.E});
  g.add(world, r, "num_recv_tokens", nrecv, {});
  g.add(world, r, "num_recv_tokens_per_expert", nrecv_e, {L});
  g.add(world, r, "recv_src", src, {N});
  g.add(world, r, "recv_x", bx, {N, H});
  g.add(world, r, "recv_topk_idx", bidx, {N, K});
  g.add(world, r, "recv_topk_weights", bw, {N, K});
  g.add(world, r, "combined_x", comb, {T, H});
  return g;
}

Gathered low_latency_mode(const DeepEpOptions& o, const DeepEpCase& c, const comm::Group& world, int r, I& sent) {
  const I R = c.R, T = c.T, H = c.H, K = c.K, L = c.L, N = R * c.M, HB = H / 128;
  // Each token cast once: E4M3 codes and one scale per 128 channels.
  Mat<float> xr(T, H);
  for (I t = 0; t < T; ++t)
    for (I h = 0; h < H; ++h) xr(t, h) = c.x.data[(r * T + t) * H + h];
  const quant::Quantized q = quant::tiles_1x128(xr, quant::ScaleRule::amax);
  const int64_t* idx = &c.idx[static_cast<size_t>(r * T * K)];
  // One message per (token, expert) to the expert's rank, destination-major, then (token, j).
  std::vector<int> smsg(static_cast<size_t>(R), 0), rmsg(static_cast<size_t>(R)), meta, at(static_cast<size_t>(T * K), -1);
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  int m = 0;
  for (I d = 0; d < R; ++d)
    for (I t = 0; t < T; ++t)
      for (I j = 0; j < K; ++j) {
        const I e = idx[t * K + j];
        if (e < 0 || (o.plant_next_rank ? (e / L + 1) % R : e / L) != d) continue;
        ++smsg[static_cast<size_t>(d)], at[static_cast<size_t>(t * K + j)] = m++;
        codes.insert(codes.end(), q.codes.begin() + t * H, q.codes.begin() + (t + 1) * H);
        for (I b = 0; b < HB; ++b) scales.push_back(q.scales(t, b));
        meta.push_back(static_cast<int>(r * T + t)), meta.push_back(static_cast<int>(e % L));
      }
  world.alltoall(smsg.data(), 1, rmsg.data(), "the dispatch counts' all-to-all");
  std::vector<uint8_t> rcodes;
  std::vector<float> rscales;
  std::vector<int> rmeta;
  exchange(world, codes, smsg, rcodes, rmsg, H, "the dispatch of the E4M3 codes (all-to-allv)");
  exchange(world, scales, smsg, rscales, rmsg, HB, "the dispatch of the scales (all-to-allv)");
  exchange(world, meta, smsg, rmeta, rmsg, 2, "the dispatch of the source ids (all-to-allv)");
  sent = static_cast<I>(codes.size() + scales.size() * 4 + meta.size() * 4);
  // The receiver packs each local expert's rows at the front; y = expert_scale[e] dequant(x) for the combine.
  const I n = static_cast<I>(rmeta.size() / 2);
  std::vector<int> count(static_cast<size_t>(L), 0), src(static_cast<size_t>(L * N), -1);
  std::vector<float> bx(static_cast<size_t>(L * N * H), 0.0f), bs(static_cast<size_t>(L * N * HB), 0.0f), y(static_cast<size_t>(n * H));
  for (I i = 0; i < n; ++i) {
    const I l = rmeta[static_cast<size_t>(2 * i + 1)], row = l * N + count[static_cast<size_t>(l)]++;
    require(count[static_cast<size_t>(l)] <= N, "ep-moe --deepep low_latency: local expert {} of rank {} received more "
            "than R M = {} tokens", l, r, N);
    src[static_cast<size_t>(row)] = rmeta[static_cast<size_t>(2 * i)];
    for (I b = 0; b < HB; ++b) bs[static_cast<size_t>(row * HB + b)] = o.plant_drop_scale ? 1.0f : rscales[static_cast<size_t>(i * HB + b)];
    for (I h = 0; h < H; ++h) {
      const float v = formats::from_e4m3(rcodes[static_cast<size_t>(i * H + h)]);
      bx[static_cast<size_t>(row * H + h)] = v;
      y[static_cast<size_t>(i * H + h)] = c.scale[static_cast<size_t>(r * L + l)] * (v * bs[static_cast<size_t>(row * HB + h / 128)]);
    }
  }
  // Combine: y back in arrival order; the source reduces with the weights, in top-k order.
  std::vector<float> back, comb(static_cast<size_t>(T * H), 0.0f);
  exchange(world, y, rmsg, back, smsg, H, "the combine (all-to-allv)");
  for (I t = 0; t < T; ++t)
    for (I j = 0; j < K; ++j)
      if (const int mm = at[static_cast<size_t>(t * K + j)]; mm >= 0)
        for (I h = 0; h < H; ++h)
          comb[static_cast<size_t>(t * H + h)] += c.w.data[(r * T + t) * K + j] * back[static_cast<size_t>(mm * H + h)];
  Gathered g;
  g.add(world, r, "recv_count", count, {L});
  g.add(world, r, "recv_src", src, {L, N});
  g.add(world, r, "recv_x", bx, {L, N, H});
  g.add(world, r, "recv_x_scales", bs, {L, N, HB});
  g.add(world, r, "combined_x", comb, {T, H});
  return g;
}

}  // namespace

std::string deepep_layout(const std::string& mode) {
  require(mode == "normal" || mode == "low_latency", "ep-moe: --deepep '{}' violates normal | low_latency", mode);
  return mode == "normal" ? moe::kDeepEpNormal : moe::kDeepEpLowLatency;
}

void deepep_setup(const DeepEpOptions& o, int P) {
  require(!o.case_dir.empty(), "ep-moe: --deepep needs --case CASE_DIR (from `ladder deepep write --mode {} --ranks "
          "{}`)", o.mode, P);
  require(!o.out.empty(), "ep-moe: --deepep needs --out DIR (the candidate folder rank 0 writes)");
  require(!fs::exists(o.out) || fs::is_directory(o.out), "ep-moe: --out {} exists and is not a folder", o.out);
  require(!o.plant_drop_scale || o.mode == "low_latency", "ep-moe: --test-plant-drop-scale violates --deepep "
          "low_latency (only that mode sends scales)");
  const DeepEpCase c = read_deepep_case(o);
  require(c.R == P, "ep-moe --deepep {}: --case {} has num_ranks = {}, violates the rank count {} (run it with "
          "mpirun -np {})", o.mode, o.case_dir, c.R, P, c.R);
}

int deepep_run_ranks(const DeepEpOptions& o, int rank, int P) {
  const comm::Group world = comm::Group::world(o.timeout_s);
  const DeepEpCase c = read_deepep_case(o);
  const std::string layout = deepep_layout(o.mode);
  I sent = 0;
  const Gathered g = o.mode == "normal" ? normal_mode(o, c, world, rank, sent) : low_latency_mode(o, c, world, rank, sent);
  std::vector<int64_t> bytes(static_cast<size_t>(P));
  world.gather(&sent, 1, bytes.data(), 0, "the sent bytes' gather");
  int ok = 1;
  if (rank == 0) {
    fs::create_directories(o.out);
    for (const auto& [name, t] : g.out) write_npy(fs::path(o.out) / (name + ".npy"), t.dtype, t.shape, t.bytes.data());
    const std::vector<CheckReport> reps = moe::deepep_check(layout, c.cf.inputs, c.cf.params, c.cf.expected, g.out);
    std::string failed;
    for (const CheckReport& rep : reps)
      if (!rep.pass) failed += (failed.empty() ? "" : ", ") + rep.output, ok = 0;
    fmt::print("ep-moe --deepep {} on {} ranks (T = {}, H = {}, E = {}, k = {}): dispatch bytes per rank {}; wrote {} "
               "outputs to {}; {} (in process): {}\n", o.mode, P, c.T, c.H, c.E, c.K, fmt::join(bytes, " "),
               g.out.size(), o.out, layout, ok ? "PASS" : "FAIL (" + failed + ")");
  }
  world.bcast(&ok, 1, 0, "the verdict's broadcast");
  return ok ? 0 : 1;
}

}  // namespace ladder::ep
