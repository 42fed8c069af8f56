// tests/02-attention/test_attention_cli.cpp -- `ladder reproduce 02-attention --quick` through its entry point
// (tools/ladder/02-attention/reproduce.cpp): the paper's numbers come from data/papers/02-attention.json
// and sit beside ours in the report, and the Fig. 9 table and CSV are written. Timings are not checked.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "cli.hpp"
#include "golden_util.hpp"

TEST_CASE("reproduce 02-attention --quick: the A100 table beside the paper's numbers, the Fig. 9 table and CSV") {
  ladder::test::TempDir tmp;
  const std::string md = ladder::cli::stage_cli("02-attention").reproduce({tmp.path, true});
  for (const char* s : {"| GFLOPs | 66.6 | 835.5 | 75.2 |", "| HBM R/W (GB) | 40.3 | 25.24 | 4.4 |",
                        "41.7 (measured)", "7.3 (measured)", "Dao-AILab/flash-attention#741", "| 512 |"})
    CHECK_MESSAGE(md.find(s) != std::string::npos, s);
  std::ifstream csv(tmp.path / "02-attention-fig9.csv");
  std::stringstream text;
  text << csv.rdbuf();
  CHECK(text.str().rfind("N,naive_fwd_s,tiled_fwd_s,", 0) == 0);
  CHECK(text.str().find("\n512,") != std::string::npos);
}
