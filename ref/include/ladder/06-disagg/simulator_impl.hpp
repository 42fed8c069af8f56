// ladder/06-disagg/simulator_impl.hpp -- stage 06: the event loop of simulate() (see simulator.hpp).
#pragma once
// The tail of simulator.hpp (which includes this file last); included on its own, it brings simulator.hpp.
#include "ladder/06-disagg/simulator.hpp"
#include <algorithm>
#include <deque>
#include <utility>
#include <vector>

namespace ladder::disagg {
namespace detail {

enum : int32_t { kArrival = 0, kWorkerDone = 1, kMigrated = 2 };
enum class Role { prefill, decode, colocated };

struct Event {
  double t;
  uint64_t seq;  // ties in time are served in the order the events were created
  int32_t kind;
  int64_t who;  // worker (kWorkerDone) or request slot (kMigrated)
};
struct Later {
  bool operator()(const Event& a, const Event& b) const { return a.t > b.t || (a.t == b.t && a.seq > b.seq); }
};

struct Worker {
  Role role = Role::prefill;
  bool busy = false, doing_prefill = false;
  std::vector<int64_t> batch;  // the prefill batch in progress (slots)
  DecodeState dec;             // decode and colocated workers
  int64_t migrating = 0;       // pulled, not yet in the batch (KV in transfer, or here and waiting for the boundary)
  std::vector<int64_t> arrived;  // KV migrated, waiting for the next step boundary to join (slots, in arrival order)
  std::deque<int64_t> prefilling;                   // chunked: admitted, prompt not yet all processed (FCFS)
  std::vector<std::pair<int64_t, int64_t>> chunks;  // chunked: (slot, tokens) of the step in progress
};

struct Slot {
  RequestRecord rec;
  int64_t blocks = 0;
  int64_t done = 0;  // chunked: prompt tokens processed so far
};

class Engine {
 public:
  Engine(const StepModel& m, const Cluster& c, const Workload& w, const Slo& slo, const SimOptions& o)
      : m_(m), distserve_(dynamic_cast<const DistServeModel*>(&m)), c_(c), slo_(slo), o_(o), arrivals_(w) {
    check_cluster(c, w);
    res_.summary.capacity_blocks = c.capacity_blocks();
    const int64_t counts[3] = {c.prefill, c.decode, c.colocated};
    const Role roles[3] = {Role::prefill, Role::decode, Role::colocated};
    for (int k = 0; k < 3; ++k)
      for (int64_t i = 0; i < counts[k]; ++i) {
        workers_.emplace_back();
        workers_.back().role = roles[k];
      }
  }

  SimResult run() {
    schedule_next_arrival();
    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), Later{});
      const Event e = heap_.back();
      heap_.pop_back();
      ++res_.queued_events;
      if (e.kind == kWorkerDone && !o_.queue_every_step && plain_decode_step(workers_[static_cast<size_t>(e.who)])) {
        run_decode_steps(e.t, e.who);
        continue;
      }
      if (e.kind == kArrival) on_arrival(e.t);
      else if (e.kind == kWorkerDone) on_worker_done(e.t, e.who);
      else on_migrated(e.t, e.who);
      dispatch(e.t);
    }
    if (o_.keep_requests)
      std::sort(res_.records.begin(), res_.records.end(),
                [](const RequestRecord& a, const RequestRecord& b) { return a.id < b.id; });
    return std::move(res_);
  }

 private:
  void push(double t, int32_t kind, int64_t who) {
    heap_.push_back(Event{t, seq_++, kind, who});
    std::push_heap(heap_.begin(), heap_.end(), Later{});
  }
  void schedule_next_arrival() {
    if (arrivals_.done()) return;
    pending_ = arrivals_.next();
    push(pending_.t_ms, kArrival, 0);
  }
  int64_t alloc_slot() {
    if (!free_.empty()) {
      const int64_t s = free_.back();
      free_.pop_back();
      return s;
    }
    slots_.emplace_back();
    return static_cast<int64_t>(slots_.size()) - 1;
  }

  void on_arrival(double t) {
    const int64_t s = alloc_slot();
    Slot& sl = slots_[static_cast<size_t>(s)];
    sl.rec = RequestRecord{};
    sl.rec.id = pending_.id, sl.rec.input = pending_.input, sl.rec.output = pending_.output;
    sl.rec.arrival = t;
    sl.blocks = c_.blocks_for(pending_.input + pending_.output);
    sl.done = 0;
    tokens_owed_ += std::max<int64_t>(pending_.output - 1, 0);
    prefill_q_.push_back(s);
    res_.summary.max_in_flight = std::max(res_.summary.max_in_flight, ++in_flight_);
    schedule_next_arrival();
  }

  void on_worker_done(double t, int64_t wi) {
    Worker& w = workers_[static_cast<size_t>(wi)];
    w.busy = false;
    if (chunked(w)) return on_chunked_done(t, wi);
    if (w.doing_prefill) {
      for (int64_t s : w.batch) {
        RequestRecord& r = slots_[static_cast<size_t>(s)].rec;
        r.first_token = t;
        r.prefilled = r.input, r.chunks = 1;
        if (r.output <= 1) {
          if (w.role == Role::colocated) w.dec.blocks_used -= slots_[static_cast<size_t>(s)].blocks;
          r.pulled = r.decode_start = t;
          finish(s, t);
        } else if (w.role == Role::prefill) {
          decode_q_.push_back(s);
        } else {
          r.decode_worker = wi, r.pulled = r.decode_start = t;
          join_batch(w.dec, RunningRequest{s, r.input, r.output, 1, slots_[static_cast<size_t>(s)].blocks});
        }
      }
      w.batch.clear();
      return;
    }
    finished_.clear();
    finish_decode_step(w.dec, finished_);
    for (int64_t s : finished_) finish(s, t);
  }

  // The KV cache is here: the request waits for the worker's next step boundary (or joins at once if it
  // is idle; join_arrived, from start_decode), never the step in progress, priced without it.
  void on_migrated(double, int64_t s) { workers_[size_t(slots_[size_t(s)].rec.decode_worker)].arrived.push_back(s); }
  void join_arrived(double t, Worker& w) {
    for (int64_t s : w.arrived) {
      Slot& sl = slots_[static_cast<size_t>(s)];
      sl.rec.decode_start = t;
      --w.migrating;
      join_batch(w.dec, RunningRequest{s, sl.rec.input, sl.rec.output, 1, sl.blocks});
    }
    w.arrived.clear();
  }

  void finish(int64_t s, double t) {
    RequestRecord& r = slots_[static_cast<size_t>(s)].rec;
    r.finish = t;
    Summary& S = res_.summary;
    const double ttft = r.ttft(), tpot = r.tpot();
    ++S.requests;
    const bool a = ttft <= slo_.ttft_ms, b = tpot <= slo_.tpot_ms;
    S.met_ttft += a, S.met_tpot += b, S.met_both += a && b;
    S.sum_ttft += ttft, S.sum_tpot += tpot, S.sum_e2e += t - r.arrival;
    S.max_ttft = std::max(S.max_ttft, ttft), S.max_tpot = std::max(S.max_tpot, tpot);
    S.end_ms = std::max(S.end_ms, t);
    if (o_.keep_requests) res_.records.push_back(r);
    free_.push_back(s);
    --in_flight_;
  }

  // Decode workers pull whenever they can (also mid-step: the migration overlaps the step). The head
  // of the pull queue (FCFS) goes to the least-loaded decode worker that can admit it: the fewest
  // requests held (running + pulled, not yet joined), ties to the fewest KV blocks reserved, then to
  // the lowest index. When no decode worker can admit the head, nobody pulls (no overtaking).
  void pull(double t) {
    const auto load = [this](int64_t k) {  // (requests held, blocks reserved); decode workers follow the prefill ones
      const Worker& w = workers_[static_cast<size_t>(k)];
      return std::pair{static_cast<int64_t>(w.dec.running.size()) + w.migrating, w.dec.blocks_used};
    };
    while (!decode_q_.empty()) {
      const int64_t s = decode_q_.front();
      Slot& sl = slots_[static_cast<size_t>(s)];
      int64_t wi = -1;
      for (int64_t k = c_.prefill; k < c_.prefill + c_.decode; ++k) {
        const Worker& v = workers_[static_cast<size_t>(k)];
        if ((can_admit(v.dec, v.migrating, sl.blocks, c_.capacity_blocks(), c_.decode_max_batch) ||
             (o_.faults.admit_past_capacity && load(k).first < c_.decode_max_batch)) && (wi < 0 || load(k) < load(wi)))
          wi = k;
      }
      if (wi < 0) break;
      Worker& w = workers_[static_cast<size_t>(wi)];
      decode_q_.pop_front();
      w.dec.blocks_used += sl.blocks;
      res_.summary.max_blocks_used = std::max(res_.summary.max_blocks_used, w.dec.blocks_used);
      ++w.migrating;
      sl.rec.decode_worker = wi, sl.rec.pulled = t;
      push(t + (o_.faults.drop_kv_transfer ? 0.0 : c_.kv_transfer_ms(sl.rec.input)), kMigrated, s);
    }
  }

  bool start_prefill(double t, int64_t wi) {
    Worker& w = workers_[static_cast<size_t>(wi)];
    BatchStats b;
    while (!prefill_q_.empty()) {
      const int64_t s = prefill_q_.front();
      Slot& sl = slots_[static_cast<size_t>(s)];
      const double len = static_cast<double>(sl.rec.input);
      if (b.n > 0 && b.sum_tokens + len > static_cast<double>(c_.prefill_token_budget)) break;
      if (w.role == Role::colocated) {
        if (!can_admit(w.dec, b.n, sl.blocks, c_.capacity_blocks(), c_.decode_max_batch)) break;
        w.dec.blocks_used += sl.blocks;
        res_.summary.max_blocks_used = std::max(res_.summary.max_blocks_used, w.dec.blocks_used);
      }
      prefill_q_.pop_front();
      w.batch.push_back(s);
      sl.rec.prefill_worker = wi, sl.rec.prefill_start = t;
      ++b.n, b.sum_tokens += len, b.sum_sq += len * len;
    }
    if (b.n == 0) return false;
    w.busy = w.doing_prefill = true;
    ++res_.summary.prefill_batches;
    push(t + m_.prefill_ms(b), kWorkerDone, wi);
    return true;
  }

  bool start_decode(double t, int64_t wi) {
    Worker& w = workers_[static_cast<size_t>(wi)];
    join_arrived(t, w);
    if (w.dec.running.empty()) return false;
    push(begin_decode_step(t, w), kWorkerDone, wi);
    return true;
  }

  // Starts a decode step of the running batch at t; returns its end time.
  double begin_decode_step(double t, Worker& w) {
    // Every decode step of a non-empty batch yields at least one token, so there can never be more
    // steps than tokens owed: a step that yields none would loop forever.
    require(res_.summary.decode_steps < tokens_owed_,
            "simulator: decode step {} with only {} tokens owed: a decode step produced no token",
            res_.summary.decode_steps + 1, tokens_owed_);
    const BatchStats b{static_cast<int64_t>(w.dec.running.size()), static_cast<double>(w.dec.sum_ctx), 0};
    w.busy = true, w.doing_prefill = false;
    ++res_.summary.decode_steps;
    return t + decode_ms(b);
  }

  // A decode (or unchunked colocated) worker's decode step, as opposed to a prefill batch or a chunked step.
  bool plain_decode_step(const Worker& w) const { return w.role != Role::prefill && !w.doing_prefill && !chunked(w); }

  // Most events are decode steps ending while nothing else happens: the fast path runs them back to back
  // without the event queue, doing exactly what the queue would. After every event the loop dispatches,
  // so every idle worker is stable until an event changes a queue it reads or its own state. A decode
  // step's end changes only its own worker. If the queue it reads next is empty (decode: the pull queue;
  // colocated: the prefill queue), dispatch would only start its next step (requests migrated during
  // the last one joining first), and that step's end is the next event popped iff it is strictly earlier
  // than every queued event (a tie goes to the queued one: its sequence number is smaller). Otherwise the
  // step is queued and the ordinary loop resumes. The output is unchanged (test_06_disagg_fastpath).
  void run_decode_steps(double t, int64_t wi) {
    Worker& w = workers_[static_cast<size_t>(wi)];
    for (;;) {
      w.busy = false;  // on_worker_done's decode branch
      finished_.clear();
      finish_decode_step(w.dec, finished_);
      for (int64_t s : finished_) finish(s, t);
      const bool quiet = w.role == Role::colocated ? prefill_q_.empty() : decode_q_.empty();
      if (!quiet) return dispatch(t);
      join_arrived(t, w);                 // start_decode's join
      if (w.dec.running.empty()) return;  // dispatch would start nothing anywhere
      const double end = begin_decode_step(t, w);
      if (!heap_.empty() && !(end < heap_.front().t)) return push(end, kWorkerDone, wi);
      t = end;
    }
  }

  void dispatch(double t) {
    pull(t);
    for (int64_t wi = 0; wi < static_cast<int64_t>(workers_.size()); ++wi) {
      Worker& w = workers_[static_cast<size_t>(wi)];
      if (w.busy) continue;
      if (chunked(w)) start_chunked(t, wi);
      else if (w.role == Role::prefill) start_prefill(t, wi);
      else if (w.role == Role::decode) start_decode(t, wi);
      else if (!start_prefill(t, wi)) start_decode(t, wi);  // colocated: prefill first
    }
  }

  bool chunked(const Worker& w) const { return w.role == Role::colocated && c_.chunked_prefill_tokens > 0; }

  // A hybrid step (decodes + prefill chunks) reads the weights once: the decode step plus what the
  // chunks add above an empty prefill batch, and never less than either part alone.
  double hybrid_ms(const BatchStats& pre, const BatchStats& dec) const {
    if (pre.n == 0) return m_.decode_ms(dec);
    if (dec.n == 0) return m_.prefill_ms(pre);
    const double p = m_.prefill_ms(pre), d = m_.decode_ms(dec);
    return std::max({p, d, d + p - m_.prefill_ms(BatchStats{})});
  }

  // Sarathi-Serve's stall-free batching: decodes first, then chunks of the prompts in progress, then
  // of new requests (FCFS, KV blocks reserved at admission), until the step's token budget is spent.
  bool start_chunked(double t, int64_t wi) {
    Worker& w = workers_[static_cast<size_t>(wi)];
    const int64_t decodes = static_cast<int64_t>(w.dec.running.size());
    int64_t left = std::max<int64_t>(0, c_.chunked_prefill_tokens - decodes);
    BatchStats pre;
    auto take = [&](int64_t s) {
      const Slot& sl = slots_[static_cast<size_t>(s)];
      const int64_t c = std::min(left, sl.rec.input - sl.done);
      const double p = static_cast<double>(sl.done), e = static_cast<double>(sl.done + c);
      w.chunks.emplace_back(s, c);
      ++pre.n, pre.sum_tokens += static_cast<double>(c), pre.sum_sq += e * e - p * p;
      left -= c;
    };
    for (int64_t s : w.prefilling) {
      if (left == 0) break;
      take(s);
    }
    while (left > 0 && !prefill_q_.empty()) {
      const int64_t s = prefill_q_.front();
      Slot& sl = slots_[static_cast<size_t>(s)];
      const auto waiting = static_cast<int64_t>(w.prefilling.size());
      if (!can_admit(w.dec, waiting, sl.blocks, c_.capacity_blocks(), c_.decode_max_batch)) break;
      prefill_q_.pop_front();
      w.dec.blocks_used += sl.blocks;
      res_.summary.max_blocks_used = std::max(res_.summary.max_blocks_used, w.dec.blocks_used);
      w.prefilling.push_back(s);
      sl.rec.prefill_worker = wi, sl.rec.prefill_start = t;
      take(s);
    }
    if (decodes == 0 && pre.n == 0) return false;
    if (decodes > 0) {
      require(res_.summary.decode_steps < tokens_owed_,
              "simulator: decode step {} with only {} tokens owed: a decode step produced no token",
              res_.summary.decode_steps + 1, tokens_owed_);
      ++res_.summary.decode_steps;
    }
    if (pre.n > 0) ++res_.summary.prefill_batches;
    w.busy = true, w.doing_prefill = false;
    const BatchStats dec{decodes, static_cast<double>(w.dec.sum_ctx), 0};
    push(t + hybrid_ms(pre, dec), kWorkerDone, wi);
    return true;
  }

  // The step ended: its decodes have one more token (requests that finished leave), then the chunks
  // count; a prompt now fully processed has its first token and joins the decode batch.
  void on_chunked_done(double t, int64_t wi) {
    Worker& w = workers_[static_cast<size_t>(wi)];
    finished_.clear();
    finish_decode_step(w.dec, finished_);
    for (int64_t s : finished_) finish(s, t);
    for (const auto& [s, c] : w.chunks) {
      Slot& sl = slots_[static_cast<size_t>(s)];
      RequestRecord& r = sl.rec;
      sl.done += c, ++r.chunks;
      if (sl.done < r.input && !o_.faults.first_token_early) continue;
      w.prefilling.erase(std::find(w.prefilling.begin(), w.prefilling.end(), s));
      r.first_token = r.pulled = r.decode_start = t;
      r.prefilled = sl.done;
      if (r.output <= 1) {
        w.dec.blocks_used -= sl.blocks;
        finish(s, t);
      } else {
        r.decode_worker = wi;
        join_batch(w.dec, RunningRequest{s, r.input, r.output, 1, sl.blocks});
      }
    }
    w.chunks.clear();
  }

  // The decode step's time, once per step: DistServe's fit (the usual model) called directly, so the
  // compiler can inline it; the same function, the same operations, the same result as the virtual call.
  double decode_ms(const BatchStats& b) const {
    return distserve_ ? distserve_->DistServeModel::decode_ms(b) : m_.decode_ms(b);
  }

  const StepModel& m_;
  const DistServeModel* distserve_;
  const Cluster& c_;
  const Slo& slo_;
  const SimOptions& o_;
  ArrivalStream arrivals_;
  Arrival pending_;
  std::vector<Worker> workers_;
  std::vector<Slot> slots_;
  std::vector<int64_t> free_, finished_;
  std::deque<int64_t> prefill_q_, decode_q_;
  std::vector<Event> heap_;
  uint64_t seq_ = 0;
  int64_t in_flight_ = 0, tokens_owed_ = 0;
  SimResult res_;
};

}  // namespace detail

inline SimResult simulate(const StepModel& model, const Cluster& cluster, const Workload& workload, const Slo& slo,
                          const SimOptions& options) {
  return detail::Engine(model, cluster, workload, slo, options).run();
}

}  // namespace ladder::disagg
