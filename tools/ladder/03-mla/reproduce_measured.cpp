// tools/ladder/03-mla/reproduce_measured.cpp -- `ladder reproduce 03-mla`, the measured part (report.hpp).
//
// Time per decode step vs L for every reference rung at B = 1 and B = 32 (fp32, the CPU's threads,
// median wall time; the cache in each rung's layout is prepared outside the timed step). A point is
// skipped, and said so, when the step's resident bytes (Cost) exceed the budget or its predicted time
// (a + b L through the rung's two previous points) exceeds the per-point cap. Then the notes' A100
// ratios beside ours, and the roofline: the per-token ("marginal") rates from the two longest measured
// L against this CPU's measured copy bandwidth and the GEMM rate of the same product shapes.
#include <fmt/format.h>
#include <omp.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "ladder/core/registry.hpp"
#include "ladder/core/timing.hpp"
#include "report.hpp"
#include "source_dir.hpp"

namespace ladder::cli::mla_report {
namespace {

using namespace ladder::mla;
namespace fs = std::filesystem;

struct Point {
  int64_t L = 0;
  double seconds = 0;
  std::string status;  // "measured", "predicted", "no fit"
};
using Series = std::map<std::string, std::vector<Point>>;  // rung -> points in L order

// Median of a few runs after a warm-up; one run when a step takes more than half a second.
template <class F>
double time_step(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  const double warm = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (warm > 0.5) return median_seconds(f, 1);
  return median_seconds(f, std::clamp(static_cast<int>(1.0 / std::max(warm, 1e-3)), 1, 5));
}

// a + b L through the last two measured points (or the FLOP ratio from one point).
double predict(const std::vector<Point>& pts, const Rung& r, const Config& c, int64_t B, int64_t L) {
  std::vector<const Point*> m;
  for (const Point& p : pts)
    if (p.status == "measured") m.push_back(&p);
  if (m.empty()) return 0;
  const Point& q = *m.back();
  if (m.size() == 1)
    return q.seconds * r.cost(cost_shape(c, B, L)).flops / r.cost(cost_shape(c, B, q.L)).flops;
  const Point& p = *m[m.size() - 2];
  const double b = (q.seconds - p.seconds) / static_cast<double>(q.L - p.L);
  return q.seconds + std::max(b, 0.0) * static_cast<double>(L - q.L);
}

Series sweep(const Model& model, int64_t B, const std::vector<int64_t>& Ls, double cap, double budget) {
  const Config& c = model.W.cfg;
  Series s;
  for (int64_t L : Ls) {
    const Inputs in = make_inputs(model.W, InputSpec{std::vector<int64_t>(static_cast<size_t>(B), L), 7, false, 0, false});
    for (const char* id : rung_ids()) {
      const Rung& r = registry().find(mla::kStage, "ref", id);
      std::vector<Point>& pts = s[id];
      if (resident_bytes(r.cost(cost_shape(c, B, L))) > budget) {
        pts.push_back({L, 0, "no fit"});
        continue;
      }
      const double guess = predict(pts, r, c, B, L);
      if (guess > cap) {
        pts.push_back({L, guess, "predicted"});
        continue;
      }
      const auto& f = r.fn<RungFns>().f32;
      Prepared<float> p;
      if (std::string(id) == "AM") {
        p = prepare_compressed(model.W, in.cache);
        p.absorbed = model.absorbed;
      } else if (std::string(id) == "CD") {
        // CD's prefill decompresses the whole cache (as costly as one CC step); its values do not change
        // the step's time, so the timed K and V are a constant.
        p.seqlens = in.cache.seqlens;
        p.K = Array<float>({B, c.n_heads, L, c.q_head()}, 1.0f / 64);
        p.V = Array<float>({B, c.n_heads, L, c.v_head}, 1.0f / 64);
      } else {
        p = f.prepare(model.W, in.cache);
      }
      pts.push_back({L, time_step([&] { f.decode(model.W, p, in.step); }), "measured"});
    }
  }
  return s;
}

std::string cell(const Point& p) {
  if (p.status == "no fit") return "no fit";
  if (p.status == "predicted") return fmt::format("~{:.0f} (pred.)", p.seconds * 1e3);
  return fmt::format("{:.1f}", p.seconds * 1e3);
}

const Point* at(const Series& s, const std::string& id, int64_t L) {
  for (const Point& p : s.at(id))
    if (p.L == L) return &p;
  return nullptr;
}

void timing_table(Out& out, const Series& s, int64_t B, const std::vector<int64_t>& Ls) {
  std::string t = "| L |";
  for (const char* id : rung_ids()) t += fmt::format(" {} ms |", id);
  t += "\n|---|---|---|---|---|---|---|\n";
  for (int64_t L : Ls) {
    t += fmt::format("| {} |", L);
    for (const char* id : rung_ids()) t += fmt::format(" {} |", cell(*at(s, id, L)));
    t += "\n";
  }
  out.line(fmt::format("B = {}:", B));
  out.table(t);
}

// Per-token rate between the two longest measured L of a rung: (flops or cache bytes per token) / dt.
struct Marginal {
  bool ok = false;
  double flops_per_s = 0, bytes_per_s = 0;
  int64_t L0 = 0, L1 = 0;
};
Marginal marginal(const Series& s, const std::string& id, const Config& c, int64_t B) {
  std::vector<const Point*> m;
  for (const Point& p : s.at(id))
    if (p.status == "measured") m.push_back(&p);
  Marginal r;
  if (m.size() < 2) return r;
  const Point &p = *m[m.size() - 2], &q = *m.back();
  const double dt = q.seconds - p.seconds, tokens = static_cast<double>(B * (q.L - p.L));
  const Rung& rung = registry().find(mla::kStage, "ref", id);
  const double dflops = rung.cost(cost_shape(c, B, q.L)).flops - rung.cost(cost_shape(c, B, p.L)).flops;
  const double dbytes = rung.cost(cost_shape(c, B, q.L)).bytes_read - rung.cost(cost_shape(c, B, p.L)).bytes_read;
  r.ok = q.seconds > 1.2 * p.seconds && tokens > 0;  // else the per-token time is lost in the noise
  r.flops_per_s = dflops / dt, r.bytes_per_s = dbytes / dt, r.L0 = p.L, r.L1 = q.L;
  return r;
}

// The latent attention's two products at one shape, B sequences in parallel as A_CC_ME runs them:
// S = Q C^T [H, L] and O = P C [H, kv_lora]. FLOP/s: the reference rate for A_CC_ME and flash_mla.
double gemm_rate(const Config& c, int64_t B, int64_t L) {
  const int64_t H = c.n_heads, R = c.kv_lora_rank;
  Rng rng(9);
  auto rnd = [&rng](int64_t r, int64_t k) {
    Mat<float> m(r, k);
    for (int64_t i = 0; i < m.size(); ++i) m.data()[i] = static_cast<float>(rng.normal());
    return m;
  };
  const Mat<float> Q = rnd(H, R), C = rnd(L, R);
  std::vector<Mat<float>> S(static_cast<size_t>(B), Mat<float>(H, L)), O(static_cast<size_t>(B), Mat<float>(H, R));
  const double s = time_step([&] {
#pragma omp parallel for schedule(dynamic)
    for (int64_t b = 0; b < B; ++b) {
      S[b].noalias() = Q * C.transpose();
      O[b].noalias() = S[b] * C;
    }
  });
  return 4.0 * static_cast<double>(B * H * L * R) / s;
}

// Bytes read per second streaming a large array (a sum, OpenMP over chunks): CD's memory bound.
double read_bandwidth(size_t n) {
  std::vector<float> a(n, 1.0f);
  double sink = 0;
  const double s = time_step([&] {
    double total = 0;
#pragma omp parallel for reduction(+ : total) schedule(static)
    for (int64_t c = 0; c < 64; ++c) {
      float acc[16] = {};
      for (size_t i = n * c / 64; i + 16 <= n * (c + 1) / 64; i += 16)
        for (int k = 0; k < 16; ++k) acc[k] += a[i + k];
      for (float v : acc) total += v;
    }
    sink += total;
  });
  return sink > 0 ? 4.0 * static_cast<double>(n) / s : 0;
}

void write_csv_and_plot(const ReproduceContext& ctx, const std::map<int64_t, Series>& all, Out& out) {
  const fs::path csv_path = ctx.out_dir / "03-mla-timing.csv";
  std::ofstream csv(csv_path);
  csv << "B,L,rung,seconds,status\n";
  for (const auto& [B, s] : all)
    for (const char* id : rung_ids())
      for (const Point& p : s.at(id)) csv << fmt::format("{},{},{},{},{}\n", B, p.L, id, p.seconds, p.status);
  csv.close();
  const fs::path script = ladder::source_dir() / "scripts" / "plot_03_mla.py";
  const std::string cmd = fmt::format("/usr/bin/python3 '{}' '{}' '{}' > /dev/null 2>&1", script.string(),
                                      csv_path.string(), (ctx.out_dir / "03-mla-timing.png").string());
  if (!ctx.quick && std::system(cmd.c_str()) == 0)
    out.line("![time per decode step vs L, B = 1 and B = 32 (this CPU)](03-mla-timing.png)");
  else
    out.line(fmt::format("CSV: {} (plot: scripts/plot_03_mla.py; drawn in full runs when /usr/bin/python3 has matplotlib)",
                         csv_path.filename().string()));
}

}  // namespace

void measured_part(const ReproduceContext& ctx, const Model& model, Out& out) {
  const Config& c = model.W.cfg;
  const auto paper = paper_values();
  const std::map<int64_t, std::vector<int64_t>> Ls =
      ctx.quick ? std::map<int64_t, std::vector<int64_t>>{{1, {32, 512, 2048}}, {32, {32, 256}}}
                : std::map<int64_t, std::vector<int64_t>>{{1, {32, 256, 1024, 4096, 16384}}, {32, {32, 1024, 4096}}};
  const double cap = ctx.quick ? 0.25 : 3.0;
  out.line(fmt::format(
      "### Time per decode step vs L on this CPU ({}fp32, {} threads, median wall time, ms)", 
      ctx.quick ? "16 heads, hidden 1024, q_lora 512 (the cache row 512 + 64 and the head dims of DeepSeek-V2; "
                  "DeepSeek-V2's 128 heads and hidden 5120 need 2.3 GB for the weights alone), --quick: shorter L; "
                : ctx.large ? "DeepSeek-V2 shapes (--large), "
                            : "16 heads, hidden 1024, q_lora 512 (the cache row 512 + 64 and the head dims of DeepSeek-V2; "
                              "DeepSeek-V2's 128 heads and hidden 5120 need 2.3 GB for the weights alone: --large), ",
      omp_get_max_threads()));
  const char* wait = std::getenv("OMP_WAIT_POLICY");
  out.line(fmt::format(
      "OMP_WAIT_POLICY={}. On a machine shared with other busy processes, libgomp's default (spin, then sleep) "
      "can make every parallel region cost a scheduler time slice (~10 ms); run with OMP_WAIT_POLICY=passive there.",
      wait ? wait : "(unset)"));
  out.line(fmt::format(
      "A step is u = MLA(h) for every sequence: the projections (weights read once per step) and the attention "
      "over L cached tokens. 'no fit': the step's resident bytes (Cost, fp32) exceed the {:.1f} GiB budget "
      "(without --large `ladder reproduce` stays under 1 GB); "
      "'pred.': not run, a + b L through the rung's two previous points exceeds {:.1f} s. Shared machine: compare "
      "within a table.",
      measure_budget_bytes(ctx) / (1ull << 30), cap));
  std::map<int64_t, Series> all;
  for (const auto& [B, Lb] : Ls) {
    all[B] = sweep(model, B, Lb, cap, measure_budget_bytes(ctx));
    timing_table(out, all[B], B, Lb);
  }
  write_csv_and_plot(ctx, all, out);

  // The notes' A100 ratios beside ours (different hardware: only ratios carry over).
  out.line("### Ratios to A_CC_ME: the notes' A100 (bf16) beside this CPU (fp32)");
  std::string t = "| B, L | source |";
  for (const char* id : rung_ids()) t += fmt::format(" {} |", id);
  t += "\n|---|---|---|---|---|---|---|---|\n";
  auto ratio_row = [&](const char* label, const nlohmann::json& a100) {
    t += fmt::format("| {} | notes (A100) |", label);
    for (const char* id : rung_ids())
      t += a100.contains(id) ? fmt::format(" {:.2f} |", a100.at(id).get<double>() / a100.at("A_CC_ME").get<double>())
                             : " - |";
    t += "\n";
  };
  auto ours_row = [&](int64_t B, int64_t L) {
    if (!all.count(B) || !at(all[B], "A_CC_ME", L)) return;
    const Point* me = at(all[B], "A_CC_ME", L);
    t += fmt::format("| {}, {} | ours |", B, L);
    for (const char* id : rung_ids()) {
      const Point* p = at(all[B], id, L);
      t += p->status == "no fit" ? " no fit |" : fmt::format(" {:.2f}{} |", p->seconds / me->seconds,
                                                             p->status == "predicted" ? " (pred.)" : "");
    }
    t += "\n";
  };
  ratio_row("1, 1024", paper.at("a100_b1_kv1024_ms"));
  ours_row(1, ctx.quick ? 512 : 1024);
  ratio_row("1, 131072", paper.at("a100_b1_kv131072_ms"));
  ours_row(1, Ls.at(1).back());
  ratio_row("32, 1024", paper.at("a100_b32_kv1024_ms"));
  ours_row(32, ctx.quick ? 256 : 1024);
  out.table(t);
  const Point* cc = at(all[1], "CC", Ls.at(1).back());
  const Point* me = at(all[1], "A_CC_ME", Ls.at(1).back());
  out.line(fmt::format("CC / A_CC_ME at B = 1: notes {}x at L = 131072 (A100); ours {:.1f}x at L = {}{}.",
                       paper.at("cc_over_acc_me_b1_131072").get<double>(), cc->seconds / me->seconds, Ls.at(1).back(),
                       cc->status == "predicted" ? " (CC predicted from its measured per-token rate)" : ""));

  // Roofline: per-token rates vs this CPU's measured bounds.
  const double bw = copy_bandwidth(size_t{1} << (ctx.quick ? 24 : 26), 5);
  const double rbw = read_bandwidth(size_t{1} << (ctx.quick ? 24 : ctx.large ? 27 : 26));  // past any cache
  const int64_t Bl = 32, Ll = Ls.at(32).back();
  const double gemm = gemm_rate(c, Bl, Ll);
  out.line("### Roofline on this CPU: per-token rates between the two longest measured L");
  std::string r = "| rung, B | L range | GFLOP/s per cached token | cache GB/s | vs bound |\n|---|---|---|---|---|\n";
  auto row = [&](const char* id, int64_t B, bool memory_bound) {
    const Marginal m = marginal(all[B], id, c, B);
    if (!m.ok) {
      r += fmt::format("| {}, {} | - | (not resolved: fewer than two measured L, or the step time grew < 20%) | | |\n",
                       id, B);
      return;
    }
    r += fmt::format("| {}, {} | {} -> {} | {:.1f} | {:.2f} | {:.2f}x {} |\n", id, B, m.L0, m.L1, m.flops_per_s / 1e9,
                     m.bytes_per_s / 1e9, memory_bound ? m.bytes_per_s / rbw : m.flops_per_s / gemm,
                     memory_bound ? "of the read bandwidth" : "of the GEMM rate");
  };
  row("CD", 1, true);
  row("A_CC_ME", 1, false);
  row("A_CC_ME", 32, false);
  row("flash_mla", 32, false);
  row("AM", 32, false);
  row("CC", 1, false);
  out.table(r);
  out.line(fmt::format(
      "Bounds measured in this run: read bandwidth {:.1f} GB/s (a streaming sum), copy bandwidth {:.1f} GB/s (read + "
      "write, timing.hpp); GEMM rate {:.1f} GFLOP/s "
      "for the latent products at B = {}, H = {}, L = {} ([H, {}] x [{}, L]^T and back, Eigen, OpenMP over "
      "sequences). Balance {:.1f} FLOP/byte. Per cached token (fp32): CD {:.2f} FLOP/byte (memory-bound), the "
      "absorbed rungs {:.0f} FLOP/byte (2 H FLOPs per cached element: compute-bound), CC {:.0f} FLOP/byte. The "
      "FlashMLA H800 figures for comparison: {} GB/s memory-bound, {} TFLOPS compute-bound.",
      rbw / 1e9, bw / 1e9, gemm / 1e9, Bl, c.n_heads, Ll, c.kv_lora_rank, c.kv_lora_rank, gemm / rbw,
      flops_per_cached_token(Variant::CD, c) / (4 * cache_elems_per_token(Variant::CD, c)),
      flops_per_cached_token(Variant::A_CC_ME, c) / (4 * cache_elems_per_token(Variant::A_CC_ME, c)),
      flops_per_cached_token(Variant::CC, c) / (4 * cache_elems_per_token(Variant::CC, c)),
      paper.at("flashmla_h800").at("memory_GBps").get<double>(),
      paper.at("flashmla_h800").at("compute_TFLOPS").get<double>()));
}

}  // namespace ladder::cli::mla_report
