// ladder/mpi/ep_deepep.hpp -- ladder-ep-moe --deepep normal|low_latency: DeepEP's dispatch / combine across MPI
// ranks, one rank per EP rank of a case written by `ladder deepep write` (the layouts "04-moe/deepep_normal" and
// "04-moe/deepep_low_latency", ladder/04-moe/deepep.hpp: the facts from DeepEP and ladder's form of them), its
// buffers gathered onto rank 0 and written as a candidate folder that `ladder check` judges. Defined in
// mpi/src/ep_deepep.cpp (the description of each mode is there).
#pragma once
#include <string>

namespace ladder::ep {

struct DeepEpOptions {
  std::string mode;      // normal | low_latency
  std::string case_dir;  // a case folder of the mode's layout (its num_ranks = the rank count)
  std::string out;       // the candidate folder rank 0 writes (NAME.npy per output)
  bool plant_next_rank = false;   // test: every dispatch goes to the rank after its expert's (must fail)
  bool plant_drop_scale = false;  // test, low latency: the receiver drops the FP8 scale (takes 1; must fail)
  double timeout_s = 60;          // every collective's deadline (comm.hpp)
};

// The layout of `mode` ("04-moe/deepep_normal" | "04-moe/deepep_low_latency"), or an Error naming --deepep.
std::string deepep_layout(const std::string& mode);
// setup's check, local to a rank (no message): the case folder reads and verifies as the mode's layout, its
// num_ranks equals the rank count P, --out is not a file. An Error names the parameter.
void deepep_setup(const DeepEpOptions& o, int P);
// The body: dispatch, expert stand-in, combine over MPI; rank 0 writes o.out and judges it in process by the
// layout's contract (the same check as `ladder check`). Returns 0 when every output passes, 1 otherwise.
int deepep_run_ranks(const DeepEpOptions& o, int rank, int P);

}  // namespace ladder::ep
