// tools/ladder/06-disagg/reproduce.hpp -- stage 06 pieces shared by `ladder simulate` and
// `ladder reproduce 06-disagg`: attainment curves, percentiles, the plot script.
#pragma once
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ladder/06-disagg/disagg.hpp"
#include "ladder/06-disagg/rungs.hpp"
#include "source_dir.hpp"

namespace ladder::cli::disagg06 {

inline std::filesystem::path data_root() { return ladder::source_dir() / "data"; }

// The q-quantile (nearest rank) of v; v is sorted here.
inline double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t k = static_cast<size_t>(std::max(0.0, std::ceil(q * static_cast<double>(v.size())) - 1));
  return v[std::min(k, v.size() - 1)];
}

struct Curve {
  std::string name;
  std::vector<double> rate, per_gpu, attainment;
};

// Attainment at `points` rates from lo to hi (per GPU on the x axis).
inline Curve attainment_curve(const disagg::SimSetup& s, const disagg::Placement& p, double lo, double hi, int points) {
  Curve c{p.name, {}, {}, {}};
  for (int i = 0; i < points; ++i) {
    const double r = lo + (hi - lo) * static_cast<double>(i) / static_cast<double>(points - 1);
    c.rate.push_back(r);
    c.per_gpu.push_back(r / static_cast<double>(p.cluster.gpus()));
    c.attainment.push_back(disagg::attainment_at(s, p, r));
  }
  return c;
}

// Writes curves (and optionally CDF samples) as CSV and runs scripts/plot_06_disagg.py on them.
// Returns the PNG paths written ("" with a reason when Python or matplotlib is missing).
inline std::string plot(const std::filesystem::path& dir, const std::vector<Curve>& curves,
                        const std::vector<std::pair<std::string, std::vector<disagg::RequestRecord>>>& cdfs,
                        const std::string& title) {
  std::filesystem::create_directories(dir);
  {
    std::ofstream f(dir / "attainment.csv");
    f << "placement,rate_rps,per_gpu_rps,attainment\n";
    for (const Curve& c : curves)
      for (size_t i = 0; i < c.rate.size(); ++i)
        f << c.name << "," << fmt::format("{},{},{}", c.rate[i], c.per_gpu[i], c.attainment[i]) << "\n";
  }
  {
    std::ofstream f(dir / "latency.csv");
    f << "placement,ttft_ms,tpot_ms\n";
    for (const auto& [name, recs] : cdfs)
      for (const auto& r : recs) f << name << "," << fmt::format("{},{}", r.ttft(), r.tpot()) << "\n";
  }
  const std::string script = ladder::source_dir().string() + "/scripts/plot_06_disagg.py";
  const std::string cmd = fmt::format("/usr/bin/python3 '{}' '{}' '{}' > /dev/null 2>&1", script, dir.string(), title);
  if (std::system(cmd.c_str()) != 0) return "(no PNG: /usr/bin/python3 with matplotlib is needed; the CSVs are written)";
  return (dir / "attainment.png").string() + ", " + (dir / "latency_cdf.png").string();
}

}  // namespace ladder::cli::disagg06
