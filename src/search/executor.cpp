#include "search/executor.hpp"

#include "common/error.hpp"
#include "common/process.hpp"
#include "common/sha256.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <unistd.h>

namespace kb::search {

using nlohmann::json;

// ---- The one JSON mapping of a request and a result ----

namespace {

json timing_json(const eval::timing_options& t) {
  return {{"min_samples", t.min_samples},
          {"max_samples", t.max_samples},
          {"min_time", t.min_time},
          {"target_rsd", t.target_rsd},
          {"max_wall", t.max_wall},
          {"input_sets", t.input_sets},
          {"check_every", t.check_every},
          {"cold_l2", t.cold_l2},
          {"block_launches", t.block_launches},
          {"throttle_fraction", t.throttle_fraction}};
}

eval::timing_options timing_from(const json& j) {
  eval::timing_options t;
  t.min_samples = j.at("min_samples").get<int>();
  t.max_samples = j.at("max_samples").get<int>();
  t.min_time = j.at("min_time").get<double>();
  t.target_rsd = j.at("target_rsd").get<double>();
  t.max_wall = j.at("max_wall").get<double>();
  t.input_sets = j.at("input_sets").get<int>();
  t.check_every = j.at("check_every").get<int>();
  t.cold_l2 = j.at("cold_l2").get<bool>();
  t.block_launches = j.at("block_launches").get<bool>();
  t.throttle_fraction = j.at("throttle_fraction").get<double>();
  return t;
}

json options_json(const eval::options& o) {
  json j{{"shape", o.shape},
         {"seeds", o.seeds},
         {"seed_base", o.seed_base},
         {"determinism_runs", o.determinism_runs},
         {"sessions", o.sessions},
         {"verify_only", o.verify_only},
         {"sanitize", o.sanitize},
         {"hang_timeout", o.hang_timeout.count()},
         {"compile_timeout", o.compile_timeout.count()},
         {"timing", timing_json(o.timing)},
         {"delta", o.delta},
         {"delta_source", o.delta_source},
         {"arch", o.arch ? json(*o.arch) : json(nullptr)},
         {"ceilings", task::to_json(o.ceilings)},
         {"cache_dir", o.cache_dir.string()},
         {"no_sandbox", o.no_sandbox}};
  if (o.profile != eval::profile_mode::none) { // absent otherwise: earlier jobs keep their keys
    j["profile"] = to_string(o.profile);
  }
  if (o.timing.placement != gpu::protocol::placement::fixed) { // likewise
    j["placement"] = gpu::protocol::to_string(o.timing.placement);
  }
  return j;
}

eval::options options_from(const json& j) {
  eval::options o;
  o.shape = j.at("shape").get<std::string>();
  o.seeds = j.at("seeds").get<int>();
  o.seed_base = j.at("seed_base").get<uint64_t>();
  o.determinism_runs = j.at("determinism_runs").get<int>();
  o.sessions = j.at("sessions").get<int>();
  o.verify_only = j.at("verify_only").get<bool>();
  o.sanitize = j.at("sanitize").get<bool>();
  o.hang_timeout = std::chrono::seconds(j.at("hang_timeout").get<int64_t>());
  o.compile_timeout = std::chrono::seconds(j.at("compile_timeout").get<int64_t>());
  o.timing = timing_from(j.at("timing"));
  o.delta = j.at("delta").get<double>();
  o.delta_source = j.at("delta_source").get<std::string>();
  if (!j.at("arch").is_null()) {
    o.arch = j.at("arch").get<std::string>();
  }
  // The ceilings decide the floor and the physical limit (a rejection), so the worker uses the
  // ones the submitting process resolved for the device, not its own default.
  if (j.contains("ceilings")) { // absent in jobs queued before the ceilings travelled
    o.ceilings = task::ceilings_from_json(j.at("ceilings"));
  }
  o.cache_dir = j.at("cache_dir").get<std::string>();
  o.no_sandbox = j.at("no_sandbox").get<bool>();
  const std::string profile = j.value("profile", std::string("none"));
  const auto mode = eval::profile_mode_from_string(profile);
  if (!mode) {
    fail("an evaluation request names profile mode \"{}\"", profile);
  }
  o.profile = *mode;
  const std::string placement = j.value("placement", std::string("fixed"));
  const auto where = gpu::protocol::placement_from_string(placement);
  if (!where) {
    fail("an evaluation request names placement \"{}\"", placement);
  }
  o.timing.placement = *where;
  return o;
}

json input_json(const eval::candidate_input& c) {
  return {{"source", c.source},
          {"name", c.name},
          {"origin", c.origin},
          {"strategy", c.strategy},
          {"params", c.params}};
}

eval::candidate_input input_from(const json& j) {
  eval::candidate_input c;
  c.source = j.at("source").get<std::string>();
  c.name = j.at("name").get<std::string>();
  c.origin = j.at("origin").get<std::string>();
  c.strategy = j.at("strategy").get<std::string>();
  c.params = j.at("params");
  return c;
}

} // namespace

json to_json(const eval_request& r) {
  return {{"project_root", r.project_root.string()},
          {"task_file", r.task_file.string()},
          {"candidate", input_json(r.candidate)},
          {"baseline", input_json(r.baseline)},
          {"options", options_json(r.options)}};
}

eval_request eval_request_from_json(const json& j) {
  eval_request r;
  r.project_root = j.at("project_root").get<std::string>();
  r.task_file = j.at("task_file").get<std::string>();
  r.candidate = input_from(j.at("candidate"));
  r.baseline = input_from(j.at("baseline"));
  r.options = options_from(j.at("options"));
  return r;
}

eval::result eval_result_from_json(const json& j) {
  try {
    return eval::stored_result(j);
  } catch (const std::exception& e) {
    fail("a job's result cannot be read: {}", e.what());
  }
}

store::job_key job_key_of(const task::contract& c, const eval_request& r,
                          const std::string& devices) {
  json protocol = options_json(r.options);
  protocol.erase("cache_dir"); // where builds are cached changes no result
  protocol["baseline"] = sha256_hex(r.baseline.source);
  protocol["contract"] = c.digest;
  protocol["kblaster"] = KBLASTER_VERSION;
  protocol["judge_protocol"] = eval::judge_protocol_version;
  protocol["devices"] = devices;
  return {c.id, sha256_hex(r.candidate.source), sha256_hex(protocol.dump())};
}

// ---- How long this thread's evaluations may wait ----

namespace {
thread_local std::optional<std::chrono::steady_clock::time_point> this_threads_wait_limit;
} // namespace

wait_limit::wait_limit(std::chrono::steady_clock::time_point until)
    : m_before(this_threads_wait_limit) {
  this_threads_wait_limit = until;
}

wait_limit::~wait_limit() {
  this_threads_wait_limit = m_before;
}

std::optional<std::chrono::steady_clock::time_point> wait_limit_of_this_thread() {
  return this_threads_wait_limit;
}

// ---- Local ----

namespace {

class local_executor final : public executor {
public:
  explicit local_executor(fs::path root) : m_root(std::move(root)) {}
  std::string name() const override { return "local"; }
  int slots() const override { return 1; }
  eval::result evaluate(const task::contract& c, const eval::candidate_input& candidate,
                        const eval::candidate_input& baseline, const eval::options& opt) override {
    std::lock_guard lock(m_gpu); // one evaluation at a time on this host's GPU
    return eval::evaluate(m_root, c, candidate, baseline, opt, {});
  }

private:
  fs::path m_root;
  std::mutex m_gpu;
};

// ---- Queue ----

class queue_executor final : public executor {
public:
  queue_executor(fs::path root, queue_options opt, std::unique_ptr<worker_provider> workers)
      : m_root(std::move(root)), m_opt(std::move(opt)), m_workers(std::move(workers)) {
    m_tender = std::thread([this] { tend_loop(); });
  }
  ~queue_executor() override {
    {
      std::lock_guard lock(m_mutex);
      m_stop = true;
    }
    m_wake.notify_all();
    m_tender.join();
    m_workers->shutdown();
  }
  std::string name() const override { return m_workers->name(); }
  int slots() const override { return m_workers->slots(); }

  eval::result evaluate(const task::contract& c, const eval::candidate_input& candidate,
                        const eval::candidate_input& baseline, const eval::options& opt) override {
    const eval_request request{m_root, c.file, candidate, baseline, opt};
    const auto key = job_key_of(c, request, m_opt.devices);
    store::store st(m_opt.store);
    const int64_t id = st.submit(key, to_json(request), m_opt.run, m_opt.max_attempts).id;
    {
      std::lock_guard lock(m_mutex);
      m_pending.insert(id);
    }
    m_wake.notify_all();
    const auto deadline = std::chrono::steady_clock::now() + m_opt.job_deadline;
    const auto budget_end = wait_limit_of_this_thread();
    const auto give_up = [&](const std::string& reason, const std::string& message) {
      {
        std::lock_guard lock(m_mutex);
        m_pending.erase(id);
      }
      eval::result r;
      r.final = eval::verdict::error;
      r.reason = reason;
      r.message = message;
      r.detail = {{"job", id}};
      return r;
    };
    while (true) {
      if (const int sig = stop_requested(); sig != 0) {
        // The job stays in the queue (a worker that holds it is stopped with this process, and
        // its lease runs out): `--resume` or another run takes it again.
        return give_up("run.interrupted",
                       fmt::format("stopped by {} while job {} waited", signal_name(sig), id));
      }
      if (budget_end && std::chrono::steady_clock::now() >= *budget_end) {
        // No worker took it in the search's time: withdrawn, so that none spends a GPU on it now
        // (a later enqueue retries it). One a worker holds runs on; its result stays for reuse.
        if (const auto j = st.find_job(id); j && j->state == store::job_state::queued) {
          st.abandon(id, "budget.exhausted");
        }
        return give_up("budget.exhausted",
                       fmt::format("the search's budget ran out while job {} waited", id));
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        st.abandon(id, "queue.deadline");
        return give_up("queue.deadline",
                       fmt::format("job {} did not finish within {} s", id,
                                   m_opt.job_deadline.count()));
      }
      const auto j = st.find_job(id);
      if (!j) {
        fail("queue job {} vanished from the store", id);
      }
      if (j->state == store::job_state::done || j->state == store::job_state::failed) {
        std::lock_guard lock(m_mutex);
        m_pending.erase(id);
        if (j->state == store::job_state::done) {
          return eval_result_from_json(j->result);
        }
        eval::result r;
        r.final = eval::verdict::error;
        r.reason = j->reason.empty() ? "queue.failed" : j->reason;
        r.message = fmt::format("job {} of the queue failed after {} attempts ({})", id,
                                j->attempts, r.reason);
        r.detail = {{"job", id}, {"attempts", j->attempts}};
        return r;
      }
      std::this_thread::sleep_for(m_opt.poll);
    }
  }

private:
  void tend_loop() {
    std::unique_ptr<store::store> st;
    std::unique_lock lock(m_mutex);
    while (!m_stop) {
      m_wake.wait_for(lock, m_opt.poll);
      if (m_stop) {
        break;
      }
      const std::vector<int64_t> pending(m_pending.begin(), m_pending.end());
      lock.unlock();
      try {
        if (!st) {
          st = std::make_unique<store::store>(m_opt.store);
        }
        m_workers->tend(*st, pending);
      } catch (const std::exception& e) {
        if (m_opt.say) {
          m_opt.say(fmt::format("executor {}: {}", m_workers->name(), e.what()));
        }
      }
      lock.lock();
    }
  }

  fs::path m_root;
  queue_options m_opt;
  std::unique_ptr<worker_provider> m_workers;
  std::mutex m_mutex;
  std::condition_variable m_wake;
  std::set<int64_t> m_pending;
  bool m_stop = false;
  std::thread m_tender;
};

// ---- One worker per GPU ----

class gpu_workers final : public worker_provider {
public:
  gpu_workers(fs::path kblaster, std::string store, std::vector<std::string> uuids,
              fs::path log_dir)
      : m_kblaster(std::move(kblaster)), m_store(std::move(store)), m_uuids(std::move(uuids)),
        m_logs(std::move(log_dir)) {
    if (m_uuids.empty()) {
      fail_input("no GPU to start workers on");
    }
    m_children.resize(m_uuids.size());
  }
  ~gpu_workers() override { shutdown(); }
  std::string name() const override { return fmt::format("gpus({})", m_uuids.size()); }
  int slots() const override { return static_cast<int>(m_uuids.size()); }

  void tend(store::store&, const std::vector<int64_t>& pending) override {
    if (pending.empty()) {
      return;
    }
    // A worker per GPU, started on first need and again if it ended (its job, if any, is taken
    // again when the lease runs out).
    const auto now = std::chrono::steady_clock::now();
    for (size_t i = 0; i < m_uuids.size(); ++i) {
      if (m_children[i] && m_children[i]->running()) {
        continue;
      }
      auto& b = m_backoff[i];
      if (m_children[i]) {
        // It ended: one that ended soon after its start is started again later each time
        // (0.2 s, 0.4 s, ... up to a minute), so a worker that cannot start is not restarted
        // five times a second forever.
        m_children[i].reset();
        b.failures = now - b.started < std::chrono::seconds(30) ? b.failures + 1 : 0;
        b.next = now + std::min<std::chrono::milliseconds>(
                           std::chrono::milliseconds(200) * (1LL << std::min(b.failures, 9)),
                           std::chrono::minutes(1));
      }
      if (now < b.next) {
        continue;
      }
      b.started = now;
      fs::create_directories(m_logs);
      process_spec spec;
      // A worker waits a while for more work before it ends; it is started again on need.
      // The store's location (a URL may hold a password) goes in the environment, which only
      // this user can read, not on the command line, which everyone can; the worker gets an
      // explicit environment, not this process's (its API key stays here).
      spec.argv = {m_kblaster.string(),
                   "queue",
                   "work",
                   "--idle-exit",
                   "60",
                   "--name",
                   fmt::format("gpu{}-{}", i, m_uuids[i])};
      spec.env = worker_environment();
      (*spec.env)["KBLASTER_STORE"] = m_store;
      (*spec.env)["CUDA_VISIBLE_DEVICES"] = m_uuids[i];
      spec.log_append = true; // every start of this GPU's worker, one after the other
      m_children[i] = std::make_unique<child_process>(
          spec, m_logs / fmt::format("worker-gpu{}.log", i), "KBLASTER_UNUSED_FD");
    }
  }
  void shutdown() override {
    for (auto& c : m_children) {
      if (c) {
        c->kill();
        c.reset();
      }
    }
  }

private:
  fs::path m_kblaster;
  std::string m_store;
  std::vector<std::string> m_uuids;
  fs::path m_logs;
  std::vector<std::unique_ptr<child_process>> m_children;
  struct backoff {
    int failures = 0; // starts in a row that ended within 30 s
    std::chrono::steady_clock::time_point started;
    std::chrono::steady_clock::time_point next; // no start before this
  };
  std::map<size_t, backoff> m_backoff;
};

std::string host_name() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

} // namespace

std::unique_ptr<executor> make_local_executor(fs::path project_root) {
  return std::make_unique<local_executor>(std::move(project_root));
}

std::unique_ptr<executor> make_queue_executor(fs::path project_root, queue_options opt,
                                              std::unique_ptr<worker_provider> workers) {
  return std::make_unique<queue_executor>(std::move(project_root), std::move(opt),
                                          std::move(workers));
}

std::unique_ptr<worker_provider> make_gpu_workers(fs::path kblaster, std::string store_location,
                                                  std::vector<std::string> gpu_uuids,
                                                  fs::path log_dir) {
  return std::make_unique<gpu_workers>(std::move(kblaster), std::move(store_location),
                                       std::move(gpu_uuids), std::move(log_dir));
}

gpu_spec parse_gpu_spec(const std::string& spec) {
  gpu_spec g;
  if (spec == "all") {
    g.all = true;
    return g;
  }
  const auto digits = [](const std::string& s) {
    return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
  };
  // A plain number is a count; a list names GPUs by index or UUID ("0,1", "1,", "GPU-...").
  if (digits(spec)) {
    if (spec.size() > 4) {
      fail_input("--gpus {}: too many GPUs", spec);
    }
    g.count = std::stoul(spec);
    if (g.count == 0) {
      fail_input("--gpus 0: at least one GPU");
    }
    return g;
  }
  std::istringstream items(spec);
  for (std::string item; std::getline(items, item, ',');) {
    if (item.empty()) {
      continue;
    }
    const bool uuid = item.starts_with("GPU-") && item.size() > 4 &&
                      item.find_first_of(" \t") == std::string::npos;
    if (!uuid && !(digits(item) && item.size() <= 4)) {
      fail_input("--gpus {}: expected all, a count, or indices/UUIDs separated by commas, not "
                 "\"{}\"",
                 spec, item);
    }
    if (std::find(g.items.begin(), g.items.end(), item) != g.items.end()) {
      fail_input("--gpus {}: GPU {} is named twice (one worker per GPU)", spec, item);
    }
    g.items.push_back(item);
  }
  if (g.items.empty()) {
    fail_input("--gpus \"{}\": expected all, a count, or indices/UUIDs separated by commas", spec);
  }
  return g;
}

std::vector<std::string> resolve_gpus(const std::string& spec) {
  const gpu_spec g = parse_gpu_spec(spec);
  process_spec p;
  p.argv = {"nvidia-smi", "-L"};
  p.timeout = std::chrono::seconds(30);
  const auto r = run_process(p);
  if (!r.ok()) {
    fail_input("--gpus {}: cannot list the GPUs with nvidia-smi -L ({})", spec, r.describe());
  }
  // "GPU 0: NVIDIA H200 (UUID: GPU-...)"
  std::vector<std::string> all;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    const auto at = line.find("(UUID: ");
    if (line.starts_with("GPU ") && at != std::string::npos) {
      all.push_back(line.substr(at + 7, line.find(')', at) - at - 7));
    }
  }
  if (all.empty()) {
    fail_input("--gpus {}: nvidia-smi lists no GPU", spec);
  }
  if (g.all) {
    return all;
  }
  if (g.count > 0) {
    if (g.count > all.size()) {
      fail_input("--gpus {}: this host has {} GPUs", spec, all.size());
    }
    return {all.begin(), all.begin() + static_cast<long>(g.count)};
  }
  std::vector<std::string> out;
  for (const auto& item : g.items) {
    std::string uuid;
    if (item.starts_with("GPU-")) {
      if (std::find(all.begin(), all.end(), item) == all.end()) {
        fail_input("--gpus: no GPU {} here", item);
      }
      uuid = item;
    } else {
      const size_t index = std::stoul(item);
      if (index >= all.size()) {
        fail_input("--gpus: no GPU {} (this host has {})", index, all.size());
      }
      uuid = all[index];
    }
    if (std::find(out.begin(), out.end(), uuid) != out.end()) {
      fail_input("--gpus {}: GPU {} is named twice (one worker per GPU)", spec, uuid);
    }
    out.push_back(uuid);
  }
  return out;
}

// ---- The worker ----

namespace {

eval::result run_job(const store::job& j, const std::string& worker) {
  if (j.payload.contains("probe_seconds")) {
    // A probe: work of a known duration, for measuring the queue itself (`queue probe`).
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                           std::chrono::duration<double>(
                               j.payload.at("probe_seconds").get<double>()));
    while (std::chrono::steady_clock::now() < until) {
      if (stop_requested() != 0) {
        fail("stopped by {}", signal_name(stop_requested()));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    eval::result probe;
    probe.final = eval::verdict::same;
    probe.reason = "queue.probe";
    probe.detail = {{"worker", worker}};
    return probe;
  }
  const auto request = eval_request_from_json(j.payload);
  const auto c = task::load_contract(request.task_file);
  auto r = eval::evaluate(request.project_root, c, request.candidate, request.baseline,
                          request.options, {});
  if (r.final == eval::verdict::blocked && r.reason == "blocked.no_cuda_device") {
    // What this machine can still do for the task.
    r.detail["cpu_check"] = eval::check_task_without_gpu(request.project_root, c, request.options);
  }
  return r;
}

} // namespace

worker_summary run_worker(const std::function<store::store()>& open, const worker_options& opt,
                          const std::function<void(const std::string&)>& say) {
  const std::string name =
      opt.name.empty() ? fmt::format("{}/{}", host_name(), getpid()) : opt.name;
  auto st = open();
  // The lease is renewed from a thread, on a connection of its own, opened once.
  std::optional<store::store> renewal;
  worker_summary summary;
  auto idle_since = std::chrono::steady_clock::now();
  while ((opt.max_jobs == 0 || summary.done + summary.failed < opt.max_jobs) &&
         stop_requested() == 0) {
    auto j = st.claim(name, opt.lease, opt.only_job);
    if (!j) {
      if (opt.only_job || std::chrono::steady_clock::now() - idle_since >= opt.idle_exit) {
        break;
      }
      std::this_thread::sleep_for(opt.poll);
      continue;
    }
    say(fmt::format("job {}: task {} candidate {} (attempt {})", j->id, j->key.task,
                    j->key.candidate_digest.substr(0, 12), j->attempts));
    // The lease is renewed while the evaluation runs; a worker that dies stops renewing it.
    std::atomic<bool> running{true};
    std::mutex m;
    std::condition_variable cv;
    if (!renewal) {
      renewal.emplace(open());
    }
    std::thread renewer([&] {
      try {
        auto& own = *renewal;
        std::unique_lock lock(m);
        while (!cv.wait_for(lock, opt.lease / 3, [&] { return !running.load(); })) {
          own.renew(j->id, name, opt.lease);
        }
      } catch (const std::exception& e) {
        say(fmt::format("job {}: renewing the lease failed: {}", j->id, e.what()));
      }
    });
    json result;
    std::string said; // the verdict and reason, or why the job did not run, for the lines below
    bool ok = false;
    try {
      const eval::result r = run_job(*j, name);
      said = fmt::format("{} {}", eval::to_string(r.final), r.reason);
      result = to_json(r);
      ok = true;
    } catch (const std::exception& e) {
      said = e.what();
    }
    {
      std::lock_guard lock(m);
      running = false;
    }
    cv.notify_all();
    renewer.join();
    if (const int sig = stop_requested(); sig != 0) {
      // Stopped mid-job: what it measured may be cut short, so the job goes back to the queue
      // for another worker (this attempt counts as one of the job's attempts).
      st.release(j->id, name, "worker.interrupted", true);
      say(fmt::format("job {}: given back to the queue (stopped by {})", j->id,
                      signal_name(sig)));
      break;
    }
    if (ok) {
      st.complete(j->id, name, result);
      ++summary.done;
      say(fmt::format("job {}: {}", j->id, said));
    } else {
      // The tool could not run the job here (a missing task file, a broken request): another
      // worker may.
      st.release(j->id, name, "worker.error", true);
      ++summary.failed;
      say(fmt::format("job {}: not run: {}", j->id, said));
    }
    idle_since = std::chrono::steady_clock::now();
  }
  return summary;
}

} // namespace kb::search
