#include "store/store.hpp"

#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/sha256.hpp"
#include "store/detail/impl.hpp"
#include "store/detail/schema.hpp"

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <sstream>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

namespace kb::store {

// ---- Names stored as text ----

namespace {

template <class E, size_t N>
E parse_stored(const names_of<E, N>& names, const std::string& s, const char* what) {
  if (auto e = names.parse(s)) {
    return *e;
  }
  fail("store database: unknown {} '{}'", what, s);
}

} // namespace

std::string to_string(run_status s) {
  return std::string(run_status_names.name(s));
}
std::optional<run_status> run_status_from_string(const std::string& s) {
  return run_status_names.parse(s);
}
std::string to_string(verdict v) {
  return std::string(verdict_names.name(v));
}
std::optional<verdict> verdict_from_string(const std::string& s) {
  return verdict_names.parse(s);
}
std::string to_string(candidate_origin o) {
  return std::string(candidate_origin_names.name(o));
}
std::optional<candidate_origin> candidate_origin_from_string(const std::string& s) {
  return candidate_origin_names.parse(s);
}

// ---- Location ----

fs::path resolve_dir(const std::optional<fs::path>& explicit_dir) {
  if (explicit_dir && !explicit_dir->empty()) {
    return *explicit_dir;
  }
  if (const char* env = std::getenv("KBLASTER_STORE"); env != nullptr && *env != '\0') {
    return env;
  }
  // A location that holds a password (a postgresql:// URL) travels to workers in a file only its
  // owner reads, never on a command line.
  if (const char* env = std::getenv("KBLASTER_STORE_FILE"); env != nullptr && *env != '\0') {
    struct stat st {};
    if (::stat(env, &st) != 0) {
      fail_input("KBLASTER_STORE_FILE {}: {}", env, std::strerror(errno));
    }
    if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0 || st.st_uid != ::getuid()) {
      fail_input("KBLASTER_STORE_FILE {}: must be the user's own and not readable by others "
                 "(chmod 600)",
                 env);
    }
    std::string text = read_file(env);
    text = text.substr(0, text.find('\n'));
    if (text.empty()) {
      fail_input("KBLASTER_STORE_FILE {} is empty", env);
    }
    return text;
  }
  if (const char* env = std::getenv("KBLASTER_HOME"); env != nullptr && *env != '\0') {
    return env;
  }
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0') {
    fail_input("cannot place the store: HOME is not set; pass --store DIR or set KBLASTER_HOME");
  }
  return fs::path(home) / ".local" / "share" / "kblaster";
}

bool is_database_url(const std::string& location) {
  return detail::is_postgres_url(location);
}

uint64_t filesystem_type(const fs::path& dir) {
  struct statfs st {};
  if (statfs(dir.c_str(), &st) != 0) {
    fail("statfs {}: {}", dir.string(), std::strerror(errno));
  }
  return static_cast<uint64_t>(st.f_type);
}

std::optional<std::string> network_filesystem_name(uint64_t f_type) {
  // Magic numbers of linux/magic.h and of the out-of-tree cluster filesystems.
  static constexpr std::pair<uint32_t, std::string_view> network[] = {
      {0x6969, "NFS"},        {0x517B, "SMB"},        {0xFF534D42, "CIFS"},
      {0xFE534D42, "SMB2"},   {0x65735546, "FUSE"},   {0x01021997, "9p"},
      {0x00C36400, "Ceph"},   {0x5346414F, "AFS"},    {0x6B414653, "AFS (kAFS)"},
      {0x0BD00BD0, "Lustre"}, {0x47504653, "GPFS"},   {0x73757245, "Coda"},
      {0x564C, "NCP"},        {0x19830326, "BeeGFS"}, {0x20030528, "OrangeFS"},
  };
  // f_type is a signed word: a magic number with the top bit set can come back sign-extended.
  const auto magic = static_cast<uint32_t>(f_type);
  for (const auto& [number, name] : network) {
    if (number == magic) {
      return std::string(name);
    }
  }
  return std::nullopt;
}

namespace {

// Creates every missing folder of `dir` with mode 0700: the store holds sources and results that
// are nobody else's business.
void create_private_dirs(const fs::path& dir) {
  fs::path path;
  for (const auto& part : fs::absolute(dir)) {
    path /= part;
    if (mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
      fail_input("cannot create the store folder {}: {}", path.string(), std::strerror(errno));
    }
  }
  if (!fs::is_directory(dir)) {
    fail_input("the store {} is not a folder", dir.string());
  }
}

std::string read_trimmed(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return {};
  }
  std::string text;
  try {
    text = read_file(path);
  } catch (const error&) {
    return {};
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
    text.pop_back();
  }
  return text;
}

std::string host_name() {
  std::array<char, 256> name{};
  gethostname(name.data(), name.size() - 1);
  return name.data();
}

// Field 3 (state) and field 22 (start time in clock ticks since boot) of /proc/<pid>/stat.
std::pair<char, std::string> process_state(const std::string& pid) {
  const std::string stat = read_trimmed("/proc/" + pid + "/stat");
  const auto close = stat.rfind(')');
  if (close == std::string::npos) {
    return {'\0', ""};
  }
  std::istringstream rest(stat.substr(close + 1));
  std::string field;
  char state = '\0';
  for (int index = 3; rest >> field; ++index) {
    if (index == 3) {
      state = field.empty() ? '\0' : field[0];
    }
    if (index == 22) {
      return {state, field};
    }
  }
  return {'\0', ""};
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, separator)) {
    parts.push_back(part);
  }
  return parts;
}

} // namespace

std::optional<double> utc_seconds(const std::string& time) {
  std::tm tm{};
  double frac = 0;
  int consumed = 0;
  if (std::sscanf(time.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed) != 6) {
    return std::nullopt;
  }
  if (static_cast<size_t>(consumed) < time.size() && time[consumed] == '.') {
    frac = std::strtod(time.c_str() + consumed, nullptr);
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<double>(timegm(&tm)) + frac;
}

namespace detail {

std::string now_utc() {
  const auto now = std::chrono::system_clock::now();
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  const std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", utc.tm_year + 1900,
                     utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, ms % 1000);
}

std::vector<blob_column> blob_columns(connection& db) {
  if (db.kind() == dialect::postgres) {
    statement s(db, "SELECT kcu.table_name, kcu.column_name "
                    "FROM information_schema.referential_constraints rc "
                    "JOIN information_schema.key_column_usage kcu "
                    "  ON kcu.constraint_name = rc.constraint_name "
                    " AND kcu.constraint_schema = rc.constraint_schema "
                    "JOIN information_schema.constraint_table_usage ctu "
                    "  ON ctu.constraint_name = rc.unique_constraint_name "
                    " AND ctu.constraint_schema = rc.unique_constraint_schema "
                    "WHERE ctu.table_name = 'blobs' AND kcu.constraint_schema = current_schema() "
                    "ORDER BY 1, 2");
    std::vector<blob_column> out;
    while (s.step()) {
      out.push_back({s.column_text(0), s.column_text(1)});
    }
    return out;
  }
  std::vector<std::string> tables;
  statement list(db, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
  while (list.step()) {
    tables.push_back(list.column_text(0));
  }
  std::vector<blob_column> out;
  for (const auto& table : tables) {
    statement keys(db, "SELECT \"table\", \"from\" FROM pragma_foreign_key_list(?)");
    keys.bind(1, table);
    while (keys.step()) {
      if (keys.column_text(0) == "blobs") {
        out.push_back({table, keys.column_text(1)});
      }
    }
  }
  return out;
}

std::string experiences_query(bool by_strategy) {
  return std::string(
             "SELECT id, created, run, task_id, family, op_features_json, shape, dtype, gpu, "
             "environment, "
             "state_before, strategy, params_json, predicted_speedup, measured_speedup, correct, "
             "failure_reason FROM experiences WHERE family = ? AND gpu = ?") +
         (by_strategy ? " AND strategy = ?" : "") + " ORDER BY id DESC";
}

std::string process_owner() {
  const std::string pid = std::to_string(getpid());
  return fmt::format("{}/{}/{}/{}", host_name(), read_trimmed("/proc/sys/kernel/random/boot_id"),
                     pid, process_state(pid).second);
}

bool owner_is_dead(const std::string& owner) {
  const auto parts = split(owner, '/');
  if (parts.size() != 4 || parts[0] != host_name()) {
    return false; // another machine's run: nothing here can tell
  }
  if (parts[1] != read_trimmed("/proc/sys/kernel/random/boot_id")) {
    return true;
  }
  const auto [state, started] = process_state(parts[2]);
  return started.empty() || started != parts[3] || state == 'Z' || state == 'X';
}

} // namespace detail

// ---- Opening ----

store::impl::impl(fs::path store_dir, std::string store_url, int busy_timeout_ms)
    : dir(std::move(store_dir)), url(std::move(store_url)),
      db(url.empty() ? detail::open_sqlite(dir / "store.sqlite", busy_timeout_ms)
                     : detail::open_postgres(url, busy_timeout_ms)),
      blobs(dir / "blobs") {}

blob_ref store::impl::put(std::string_view bytes) {
  detail::transaction tx(db);
  // Written under the write lock, so gc (which holds it) never removes a blob between its
  // write and the row that references it.
  const std::string digest = blobs.put(bytes);
  detail::statement(
      db, "INSERT INTO blobs (digest, size) VALUES (?, ?) ON CONFLICT (digest) DO NOTHING")
      .bind_all(digest, static_cast<int64_t>(bytes.size()))
      .run();
  tx.commit();
  return {digest, bytes.size()};
}

namespace {

// Switching to WAL needs a moment of exclusive access, which SQLite does not wait for.
void enable_wal(detail::connection& db, int busy_timeout_ms) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(busy_timeout_ms);
  while (true) {
    try {
      if (detail::pragma(db, "journal_mode") == "wal" ||
          detail::pragma(db, "journal_mode = WAL") == "wal") {
        return;
      }
      fail("the store database cannot use write-ahead logging on this filesystem");
    } catch (const detail::busy_error&) {
      if (std::chrono::steady_clock::now() > deadline) {
        throw;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

// A JSON column as stored. One that does not parse (a row edited by hand, a disk error) reads as
// {"unreadable_json": <its first 200 characters>}: one bad row never breaks a listing.
nlohmann::json json_column(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) {
    return {{"unreadable_json", text.substr(0, 200)}};
  }
  return j;
}

void require_current_schema(detail::connection& db, const std::string& where) {
  const int have = detail::schema_version(db);
  if (have != detail::latest_schema_version()) {
    fail_input("the store {} has schema version {} and this kblaster reads {}; a reader does not "
               "upgrade it (any kblaster command that records does)",
               where, have, detail::latest_schema_version());
  }
}

} // namespace

store::store(const fs::path& dir) : store(open_options{dir}) {}

store::store(const open_options& options) {
  if (options.dir.empty()) {
    fail_input("no store folder given");
  }
  if (detail::is_postgres_url(options.dir.string())) {
    fs::path files = options.files;
    if (files.empty()) {
      if (const char* env = std::getenv("KBLASTER_STORE_FILES"); env != nullptr && *env != '\0') {
        files = env;
      }
    }
    if (files.empty()) {
      fail_input("the store {} keeps its blobs in a folder every host using it sees at the same "
                 "path: set KBLASTER_STORE_FILES=DIR (a shared filesystem)",
                 detail::redact_url(options.dir.string()));
    }
    // Blobs are written to a temporary file and renamed: safe on a network filesystem.
    if (!options.read_only) {
      create_private_dirs(files);
    }
    m_impl = std::make_unique<impl>(files, options.dir.string(), options.busy_timeout_ms);
    if (options.read_only) {
      require_current_schema(m_impl->db, location());
      return;
    }
    detail::migrate(m_impl->db, detail::latest_schema_version());
    reap_interrupted_runs();
    return;
  }
  if (options.read_only) {
    if (!fs::is_regular_file(options.dir / "store.sqlite")) {
      fail_input("no store at {} (it has no store.sqlite)", options.dir.string());
    }
    m_impl = std::make_unique<impl>(options.dir, "", options.busy_timeout_ms);
    m_impl->db.exec("PRAGMA query_only = ON");
    require_current_schema(m_impl->db, options.dir.string());
    return;
  }
  create_private_dirs(options.dir);
  if (auto name = network_filesystem_name(options.filesystem_type(options.dir))) {
    fail_input(
        "the store folder {} is on a network filesystem ({}), where SQLite's file locking cannot "
        "be "
        "trusted: two runs could corrupt the store. Put the store on a local disk with --store DIR "
        "or KBLASTER_HOME=DIR",
        options.dir.string(), *name);
  }
  // The database holds every record: only its owner reads it (SQLite gives its -wal and -shm
  // files the same mode).
  if (const fs::path db = options.dir / "store.sqlite"; !fs::exists(db)) {
    const int fd = ::open(db.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 && errno != EEXIST) {
      fail_input("cannot create {}: {}", db.string(), std::strerror(errno));
    }
    if (fd >= 0) {
      ::close(fd);
    }
  }
  m_impl = std::make_unique<impl>(options.dir, "", options.busy_timeout_ms);
  auto& db = m_impl->db;
  db.exec("PRAGMA foreign_keys = ON");
  enable_wal(db, options.busy_timeout_ms);
  // FULL: a transaction is on disk when COMMIT returns, even if the machine loses power.
  db.exec("PRAGMA synchronous = FULL");
  detail::migrate(db, detail::latest_schema_version());
  reap_interrupted_runs();
}

store::~store() = default;
store::store(store&&) noexcept = default;
store& store::operator=(store&&) noexcept = default;

const fs::path& store::dir() const {
  return m_impl->dir;
}
std::string store::location() const {
  return m_impl->url.empty() ? m_impl->dir.string() : detail::redact_url(m_impl->url);
}
bool store::shared() const {
  return !m_impl->url.empty();
}
int store::schema_version() const {
  return detail::schema_version(m_impl->db);
}

// ---- Blobs ----

blob_ref store::put(std::string_view bytes) {
  return m_impl->put(bytes);
}

blob_ref store::put_file(const fs::path& path) {
  // Read whole, so that the bytes hashed are the bytes written even if the file changes meanwhile.
  return m_impl->put(read_file(path));
}

std::string store::get(const std::string& digest) const {
  return m_impl->blobs.get(digest);
}
fs::path store::path_of(const std::string& digest) const {
  return m_impl->blobs.path_of(digest);
}
bool store::exists(const std::string& digest) const {
  return m_impl->blobs.exists(digest);
}

void store::atomically(const std::function<void()>& body) {
  detail::transaction tx(m_impl->db);
  body();
  tx.commit();
}

// ---- Records ----

namespace {

template <class... Args>
int64_t select_id(detail::connection& db, const char* sql, const Args&... args) {
  detail::statement s(db, sql);
  s.bind_all(args...);
  if (!s.step()) {
    fail("store database: a row just written is not there ({})", sql);
  }
  return s.column_int(0);
}

std::string dump(const nlohmann::json& j) {
  return j.dump();
}

void require(bool ok, const char* what) {
  if (!ok) {
    fail_input("store: {}", what);
  }
}

} // namespace

nlohmann::json environment::to_json() const {
  return {{"gpu_name", gpu_name},
          {"gpu_uuid", gpu_uuid},
          {"sm_count", sm_count},
          {"sm_clock_mhz", sm_clock_mhz},
          {"memory_clock_mhz", memory_clock_mhz},
          {"driver", driver},
          {"cuda_runtime", cuda_runtime},
          {"nvcc_version", nvcc_version},
          {"hostname", hostname},
          {"extra", extra}};
}

int64_t store::record_task(const task::contract& contract) {
  auto& db = m_impl->db;
  detail::transaction tx(db);
  const auto blob = m_impl->put(dump(task::to_json(contract)));
  detail::statement(db,
                    "INSERT INTO tasks (task_id, suite, family, contract_digest, contract_blob) "
                    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (task_id, contract_digest) DO NOTHING")
      .bind_all(contract.id, contract.suite,
                contract.has_family() ? task::to_string(contract.fam) : std::string("pytorch"),
                contract.digest, blob.digest)
      .run();
  const int64_t id = select_id(db, "SELECT id FROM tasks WHERE task_id = ? AND contract_digest = ?",
                               contract.id, contract.digest);
  tx.commit();
  return id;
}

int64_t store::record_environment(const environment& env) {
  auto& db = m_impl->db;
  const std::string json = dump(env.to_json());
  const std::string digest = sha256_hex(json);
  detail::transaction tx(db);
  detail::statement(
      db, "INSERT INTO environments (digest, gpu_name, gpu_uuid, sm_count, sm_clock_mhz, "
          "memory_clock_mhz, driver, cuda_runtime, nvcc_version, hostname, environment_json) "
          "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (digest) DO NOTHING")
      .bind_all(digest, env.gpu_name, env.gpu_uuid, env.sm_count, env.sm_clock_mhz,
                env.memory_clock_mhz, env.driver, env.cuda_runtime, env.nvcc_version, env.hostname,
                json)
      .run();
  const int64_t id = select_id(db, "SELECT id FROM environments WHERE digest = ?", digest);
  tx.commit();
  return id;
}

int64_t store::begin_run(const std::string& kind, const nlohmann::json& args) {
  require(!kind.empty(), "a run needs a kind");
  return detail::insert_one(
      m_impl->db,
      "INSERT INTO runs (kind, args_json, started, status, tool_version, owner) "
      "VALUES (?, ?, ?, 'running', ?, ?) RETURNING id",
      kind, dump(args), detail::now_utc(), std::string(KBLASTER_VERSION), detail::process_owner());
}

void store::finish_run(int64_t run, run_status status, const std::string& outcome,
                       const std::string& reason) {
  require(status != run_status::running,
          "finish_run needs a final status (finished or interrupted)");
  auto& db = m_impl->db;
  detail::transaction tx(db);
  detail::statement(
      db, "UPDATE runs SET finished = ?, status = ?, outcome = ?, reason = ? WHERE id = ?")
      .bind_all(detail::now_utc(), to_string(status), outcome, reason, run)
      .run();
  if (db.changes() == 0) {
    fail_input("store: no run {}", run);
  }
  tx.commit();
}

int64_t store::record_candidate(const candidate_record& candidate) {
  auto& db = m_impl->db;
  detail::transaction tx(db);
  detail::statement(db, "INSERT INTO candidates (task, source_digest, origin, strategy, "
                        "params_json, parent, created) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (task, source_digest) DO NOTHING")
      .bind_all(candidate.task, candidate.source_digest, to_string(candidate.origin),
                candidate.strategy, dump(candidate.params), candidate.parent, detail::now_utc())
      .run();
  const int64_t id = select_id(db, "SELECT id FROM candidates WHERE task = ? AND source_digest = ?",
                               candidate.task, candidate.source_digest);
  tx.commit();
  return id;
}

int64_t store::record_build(const build_record& build) {
  require(!build.key.source_digest.empty(), "a build needs its source digest");
  require(!build.outcome.empty(), "a build needs an outcome");
  return detail::insert_one(
      m_impl->db,
      "INSERT INTO builds (source_digest, flags, toolkit, arch, binary_digest, log_digest, "
      "outcome, reason, seconds, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
      build.key.source_digest, build.key.flags, build.key.toolkit, build.key.arch,
      build.binary_digest, build.log_digest, build.outcome, build.reason, build.seconds,
      detail::now_utc());
}

int64_t store::record_evaluation(const evaluation_record& e) {
  auto& db = m_impl->db;
  detail::transaction tx(db);
  std::optional<std::string> samples_digest;
  if (!e.samples.is_null()) {
    samples_digest = m_impl->put(dump(e.samples)).digest;
  }
  const std::string detail_digest = m_impl->put(dump(e.detail)).digest;
  const int64_t id = detail::insert_returning_id(
      db,
      "INSERT INTO evaluations (run, candidate, baseline, environment, build, shape, verdict, "
      "reason, candidate_median, baseline_median, speedup, ci_low, ci_high, p_value, "
      "floor_fraction, samples_digest, correctness_json, detail_digest, sandboxed, created) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
      e.run, e.candidate, e.baseline, e.environment, e.build, e.shape, to_string(e.verdict),
      e.reason, e.candidate_median, e.baseline_median, e.speedup, e.ci_low, e.ci_high, e.p_value,
      e.floor_fraction, samples_digest, dump(e.correctness), detail_digest, e.sandboxed,
      detail::now_utc());
  tx.commit();
  return id;
}

void store::record_outcome(const outcome_record& o) {
  auto& db = m_impl->db;
  detail::transaction tx(db);
  detail::statement(
      db,
      "INSERT INTO outcomes (run, task, outcome, reason, best_candidate, created) "
      "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (run, task) DO UPDATE SET outcome = excluded.outcome, "
      "reason = excluded.reason, best_candidate = excluded.best_candidate, created = "
      "excluded.created")
      .bind_all(o.run, o.task, o.outcome, o.reason, o.best_candidate, detail::now_utc())
      .run();
  tx.commit();
}

int64_t store::record_experience(const experience& x) {
  require(!x.family.empty() && !x.gpu.empty() && !x.strategy.empty(),
          "an experience needs a family, a GPU and a strategy");
  return detail::insert_one(
      m_impl->db,
      "INSERT INTO experiences (run, task_id, family, op_features_json, shape, dtype, gpu, "
      "environment, state_before, strategy, params_json, predicted_speedup, measured_speedup, "
      "correct, failure_reason, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
      "RETURNING id",
      x.run, x.task_id, x.family, dump(x.op_features), x.shape, x.dtype, x.gpu, x.environment,
      x.state_before, x.strategy, dump(x.params), x.predicted_speedup, x.measured_speedup,
      x.correct, x.failure_reason, detail::now_utc());
}

int64_t store::record_device_limits(const device_limits& x) {
  require(!x.gpu_uuid.empty(), "device limits need the device's UUID");
  require(x.copy_bandwidth > 0 && x.read_bandwidth > 0 && x.fp32_flops > 0,
          "device limits need positive bandwidths and fp32 rate");
  return detail::insert_one(
      m_impl->db,
      "INSERT INTO device_limits (gpu_uuid, gpu_name, driver, toolkit, copy_bandwidth, "
      "read_bandwidth, fp32_flops, fp16_tensor_flops, bf16_tensor_flops, tf32_tensor_flops, "
      "detail_json, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
      x.gpu_uuid, x.gpu_name, x.driver, x.toolkit, x.copy_bandwidth, x.read_bandwidth, x.fp32_flops,
      x.fp16_tensor_flops, x.bf16_tensor_flops, x.tf32_tensor_flops, dump(x.detail),
      detail::now_utc());
}

int64_t store::record_gate_calibration(const gate_calibration& x) {
  require(!x.gpu_uuid.empty(), "a gate calibration needs the device's UUID");
  require(x.comparisons > 0 && x.delta > 0 && x.spread >= 0,
          "a gate calibration needs comparisons, a positive delta and a spread");
  return detail::insert_one(
      m_impl->db,
      "INSERT INTO gate_calibrations (gpu_uuid, run, comparisons, false_positive_rate, "
      "not_same_rate, spread, delta, detail_json, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
      "RETURNING id",
      x.gpu_uuid, x.run, x.comparisons, x.false_positive_rate, x.not_same_rate, x.spread, x.delta,
      dump(x.detail), detail::now_utc());
}

std::optional<device_limits> store::find_device_limits(const std::string& gpu_uuid,
                                                       const std::string& driver,
                                                       const std::string& toolkit) const {
  detail::statement s(m_impl->db,
                      "SELECT id, created, gpu_uuid, gpu_name, driver, toolkit, copy_bandwidth, "
                      "read_bandwidth, fp32_flops, fp16_tensor_flops, bf16_tensor_flops, "
                      "tf32_tensor_flops, detail_json FROM device_limits WHERE gpu_uuid = ? AND "
                      "driver = ? AND toolkit = ? ORDER BY id DESC LIMIT 1");
  s.bind_all(gpu_uuid, driver, toolkit);
  if (!s.step()) {
    return std::nullopt;
  }
  device_limits x;
  x.id = s.column_int(0);
  x.created = s.column_text(1);
  x.gpu_uuid = s.column_text(2);
  x.gpu_name = s.column_text(3);
  x.driver = s.column_text(4);
  x.toolkit = s.column_text(5);
  x.copy_bandwidth = *s.column_optional_double(6);
  x.read_bandwidth = *s.column_optional_double(7);
  x.fp32_flops = *s.column_optional_double(8);
  x.fp16_tensor_flops = s.column_optional_double(9);
  x.bf16_tensor_flops = s.column_optional_double(10);
  x.tf32_tensor_flops = s.column_optional_double(11);
  x.detail = json_column(s.column_text(12));
  return x;
}

std::optional<gate_calibration> store::find_gate_calibration(const std::string& gpu_uuid) const {
  detail::statement s(m_impl->db,
                      "SELECT id, created, gpu_uuid, run, comparisons, false_positive_rate, "
                      "not_same_rate, spread, delta, detail_json FROM gate_calibrations WHERE "
                      "gpu_uuid = ? ORDER BY id DESC LIMIT 1");
  s.bind_all(gpu_uuid);
  if (!s.step()) {
    return std::nullopt;
  }
  gate_calibration x;
  x.id = s.column_int(0);
  x.created = s.column_text(1);
  x.gpu_uuid = s.column_text(2);
  x.run = s.column_optional_int(3);
  x.comparisons = s.column_int(4);
  x.false_positive_rate = *s.column_optional_double(5);
  x.not_same_rate = *s.column_optional_double(6);
  x.spread = *s.column_optional_double(7);
  x.delta = *s.column_optional_double(8);
  x.detail = json_column(s.column_text(9));
  return x;
}

void store::attach(int64_t run, const std::string& name, const std::string& digest) {
  require(!name.empty(), "an attachment needs a name");
  auto& db = m_impl->db;
  detail::transaction tx(db);
  detail::statement existing(db, "SELECT digest FROM artifacts WHERE run = ? AND name = ?");
  existing.bind_all(run, name);
  if (existing.step()) {
    // Replacing it would drop what the run recorded first.
    if (existing.column_text(0) != digest) {
      fail_input("run {} already has an attachment '{}' with other content", run, name);
    }
    return;
  }
  detail::statement(db, "INSERT INTO artifacts (run, name, digest, created) VALUES (?, ?, ?, ?)")
      .bind_all(run, name, digest, detail::now_utc())
      .run();
  tx.commit();
}

// ---- Queries ----

std::vector<std::string> store::gpus() const {
  detail::statement s(m_impl->db, "SELECT DISTINCT gpu FROM experiences ORDER BY gpu");
  std::vector<std::string> out;
  while (s.step()) {
    out.push_back(s.column_text(0));
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> store::attachments(int64_t run) const {
  detail::statement s(m_impl->db, "SELECT name, digest FROM artifacts WHERE run = ? ORDER BY id");
  s.bind(1, run);
  std::vector<std::pair<std::string, std::string>> out;
  while (s.step()) {
    out.emplace_back(s.column_text(0), s.column_text(1));
  }
  return out;
}

std::optional<std::string> store::find_build(const build_key& key) const {
  detail::statement s(m_impl->db,
                      "SELECT binary_digest FROM builds WHERE source_digest = ? AND flags = ? AND "
                      "toolkit = ? AND arch = ? AND outcome = 'ok' ORDER BY id DESC");
  s.bind_all(key.source_digest, key.flags, key.toolkit, key.arch);
  while (s.step()) {
    const std::string digest = s.column_text(0);
    if (m_impl->blobs.intact(digest)) {
      return digest;
    }
  }
  return std::nullopt;
}

namespace {

constexpr const char* run_columns =
    "SELECT id, kind, args_json, started, finished, status, outcome, reason, tool_version, "
    "(SELECT count(*) FROM evaluations e WHERE e.run = runs.id) FROM runs";

run_info read_run(const detail::statement& s) {
  run_info r;
  r.id = s.column_int(0);
  r.kind = s.column_text(1);
  r.args = json_column(s.column_text(2));
  r.started = s.column_text(3);
  r.finished = s.column_optional_text(4).value_or("");
  r.status = parse_stored(run_status_names, s.column_text(5), "run status");
  r.outcome = s.column_text(6);
  r.reason = s.column_text(7);
  r.tool_version = s.column_text(8);
  r.evaluations = s.column_int(9);
  return r;
}

} // namespace

std::vector<run_info> store::list_runs(int limit) const {
  detail::statement s(m_impl->db, std::string(run_columns) + " ORDER BY id DESC LIMIT ?");
  s.bind(1, limit);
  std::vector<run_info> out;
  while (s.step()) {
    out.push_back(read_run(s));
  }
  return out;
}

std::optional<run_info> store::find_run(int64_t run) const {
  detail::statement s(m_impl->db, std::string(run_columns) + " WHERE id = ?");
  s.bind(1, run);
  if (!s.step()) {
    return std::nullopt;
  }
  return read_run(s);
}

std::vector<evaluation_row> store::evaluations_of_run(int64_t run) const {
  detail::statement s(
      m_impl->db,
      "SELECT e.id, t.task_id, c.strategy, c.origin, e.samples_digest, e.detail_digest, e.created, "
      "e.run, e.candidate, e.baseline, e.environment, e.build, e.shape, e.verdict, e.reason, "
      "e.candidate_median, e.baseline_median, e.speedup, e.ci_low, e.ci_high, e.p_value, "
      "e.floor_fraction, e.correctness_json, e.sandboxed "
      "FROM evaluations e JOIN candidates c ON c.id = e.candidate JOIN tasks t ON t.id = c.task "
      "WHERE e.run = ? ORDER BY e.id");
  s.bind(1, run);
  std::vector<evaluation_row> out;
  while (s.step()) {
    evaluation_row row;
    row.id = s.column_int(0);
    row.task_id = s.column_text(1);
    row.strategy = s.column_text(2);
    row.origin = parse_stored(candidate_origin_names, s.column_text(3), "candidate origin");
    row.samples_digest = s.column_optional_text(4).value_or("");
    row.detail_digest = s.column_text(5);
    row.created = s.column_text(6);
    auto& e = row.record;
    e.run = s.column_int(7);
    e.candidate = s.column_int(8);
    e.baseline = s.column_optional_int(9);
    e.environment = s.column_optional_int(10);
    e.build = s.column_optional_int(11);
    e.shape = s.column_text(12);
    e.verdict = parse_stored(verdict_names, s.column_text(13), "verdict");
    e.reason = s.column_text(14);
    e.candidate_median = s.column_optional_double(15);
    e.baseline_median = s.column_optional_double(16);
    e.speedup = s.column_optional_double(17);
    e.ci_low = s.column_optional_double(18);
    e.ci_high = s.column_optional_double(19);
    e.p_value = s.column_optional_double(20);
    e.floor_fraction = s.column_optional_double(21);
    e.correctness = json_column(s.column_text(22));
    e.sandboxed = s.column_int(23) != 0;
    e.samples = nullptr;
    e.detail = nullptr;
    out.push_back(std::move(row));
  }
  return out;
}

std::vector<outcome_record> store::outcomes_of_run(int64_t run) const {
  detail::statement s(
      m_impl->db,
      "SELECT run, task, outcome, reason, best_candidate FROM outcomes WHERE run = ? ORDER BY id");
  s.bind(1, run);
  std::vector<outcome_record> out;
  while (s.step()) {
    out.push_back({s.column_int(0), s.column_int(1), s.column_text(2), s.column_text(3),
                   s.column_optional_int(4)});
  }
  return out;
}

std::optional<std::string> store::task_id_of(int64_t task_row) const {
  detail::statement s(m_impl->db, "SELECT task_id FROM tasks WHERE id = ?");
  s.bind(1, task_row);
  if (!s.step()) {
    return std::nullopt;
  }
  return s.column_text(0);
}

std::vector<experience> store::find_experiences(const std::string& family, const std::string& gpu,
                                                const std::optional<std::string>& strategy) const {
  detail::statement s(m_impl->db, detail::experiences_query(strategy.has_value()));
  s.bind_all(family, gpu);
  if (strategy) {
    s.bind(3, *strategy);
  }
  std::vector<experience> out;
  while (s.step()) {
    experience x;
    x.id = s.column_int(0);
    x.created = s.column_text(1);
    x.run = s.column_optional_int(2);
    x.task_id = s.column_text(3);
    x.family = s.column_text(4);
    x.op_features = json_column(s.column_text(5));
    x.shape = s.column_text(6);
    x.dtype = s.column_text(7);
    x.gpu = s.column_text(8);
    x.environment = s.column_optional_int(9);
    x.state_before = s.column_text(10);
    x.strategy = s.column_text(11);
    x.params = json_column(s.column_text(12));
    x.predicted_speedup = s.column_optional_double(13);
    x.measured_speedup = s.column_optional_double(14);
    x.correct = s.column_int(15) != 0;
    x.failure_reason = s.column_text(16);
    out.push_back(std::move(x));
  }
  return out;
}

int store::reap_interrupted_runs() {
  auto& db = m_impl->db;
  std::vector<int64_t> dead;
  {
    detail::statement s(
        db, "SELECT id, owner FROM runs WHERE status = 'running' AND owner IS NOT NULL");
    while (s.step()) {
      if (detail::owner_is_dead(s.column_text(1))) {
        dead.push_back(s.column_int(0));
      }
    }
  }
  if (dead.empty()) {
    return 0;
  }
  detail::transaction tx(db);
  int reaped = 0;
  for (const int64_t id : dead) {
    detail::statement(
        db, "UPDATE runs SET status = 'interrupted', reason = 'run.process_gone', finished = ? "
            "WHERE id = ? AND status = 'running'")
        .bind_all(detail::now_utc(), id)
        .run();
    reaped += static_cast<int>(db.changes());
  }
  tx.commit();
  return reaped;
}

} // namespace kb::store
