// Evidence folders: a run's rows and blobs, self-contained, with a MANIFEST in sha256sum(1)
// format, so that a result can be checked on any machine, with or without kblaster.
#include "store/detail/impl.hpp"

#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/sha256.hpp"
#include "store/detail/schema.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include <sys/stat.h>

namespace kb::store {
namespace {

constexpr std::string_view format_name = "kblaster-evidence";
constexpr int format_version = 1;

// The candidates a run touched: evaluated, compared against, named best, and their ancestors.
constexpr std::string_view run_candidates = R"sql(
  WITH RECURSIVE chain(id) AS (
    SELECT candidate FROM evaluations WHERE run = ?1
    UNION SELECT baseline FROM evaluations WHERE run = ?1
    UNION SELECT best_candidate FROM outcomes WHERE run = ?1
    UNION SELECT c.parent FROM candidates c JOIN chain ON c.id = chain.id)
  SELECT id FROM chain WHERE id IS NOT NULL)sql";

// Which rows of each table belong to a run (?1).
std::vector<std::pair<std::string, std::string>> run_selections() {
  const std::string candidates = fmt::format("id IN ({})", run_candidates);
  return {
      {"runs", "id = ?1"},
      {"evaluations", "run = ?1"},
      {"outcomes", "run = ?1"},
      {"experiences", "run = ?1"},
      {"artifacts", "run = ?1"},
      {"candidates", candidates},
      {"tasks", fmt::format("id IN (SELECT task FROM candidates WHERE {}) OR id IN (SELECT task "
                            "FROM outcomes WHERE run = ?1)",
                            candidates)},
      {"environments", "id IN (SELECT environment FROM evaluations WHERE run = ?1) OR id IN "
                       "(SELECT environment FROM experiences WHERE run = ?1)"},
      {"builds",
       fmt::format("id IN (SELECT build FROM evaluations WHERE run = ?1) OR source_digest IN "
                   "(SELECT source_digest FROM candidates WHERE {})",
                   candidates)},
  };
}

nlohmann::json rows_json(detail::statement& s) {
  nlohmann::json rows = nlohmann::json::array();
  while (s.step()) {
    nlohmann::json row = nlohmann::json::object();
    for (int i = 0; i < s.column_count(); ++i) {
      const std::string name = s.column_name(i);
      if (s.is_null(i)) {
        row[name] = nullptr;
      } else if (s.is_integer(i)) {
        row[name] = s.column_int(i);
      } else if (s.is_real(i)) {
        row[name] = s.column_double(i);
      } else if (name.ends_with("_json")) {
        row[name] = nlohmann::json::parse(s.column_text(i));
      } else {
        row[name] = s.column_text(i);
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

void prepare_empty_folder(const fs::path& out) {
  struct stat st {};
  if (lstat(out.c_str(), &st) != 0) {
    fs::create_directories(out);
    return;
  }
  if (!S_ISDIR(st.st_mode)) {
    fail_input("--out {}: exists and is not a folder (symlinks are refused)", out.string());
  }
  if (!fs::is_empty(out)) {
    fail_input("--out {}: the folder is not empty", out.string());
  }
}

// Lexical, so that a symlink is named as itself and never resolved.
std::string manifest_path(const fs::path& out, const fs::path& file) {
  return file.lexically_relative(out).generic_string();
}

bool same_number(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.is_null() || b.is_null()) {
    return a.is_null() == b.is_null();
  }
  if (!a.is_number() || !b.is_number()) {
    return false;
  }
  const double x = a.get<double>();
  const double y = b.get<double>();
  return std::abs(x - y) <= 1e-9 * std::max(std::abs(x), std::abs(y));
}

// What a forger who edits rows.json and rewrites MANIFEST cannot keep consistent: every blob a
// row names must be in the folder (whatever the blob list says), and each evaluation's verdict,
// reason, medians and speedup must be the ones its detail blob (the judge's whole record) holds,
// the speedup the ratio of the medians.
void check_rows_against_blobs(const fs::path& dir, const nlohmann::json& document,
                              const std::map<std::string, std::string>& listed,
                              const record_reader& read, evidence_report& report) {
  const auto& tables = document.at("tables");
  for (const auto& [table, rows] : tables.items()) {
    for (const auto& row : rows) {
      for (const auto& [column, value] : row.items()) {
        // The columns that reference blobs(digest) (others, such as a task's contract_digest,
        // are digests of something else).
        const bool names_blob = column == "contract_blob" || column == "source_digest" ||
                                column == "binary_digest" || column == "log_digest" ||
                                column == "samples_digest" || column == "detail_digest" ||
                                (table == "artifacts" && column == "digest");
        if (names_blob && value.is_string() &&
            !listed.contains("blobs/" + value.get<std::string>())) {
          report.problems.push_back(fmt::format("{} row {}: its {} blob {} is missing", table,
                                                row.value("id", int64_t{0}), column,
                                                value.get<std::string>()));
        }
      }
    }
  }
  if (!tables.contains("evaluations")) {
    return;
  }
  for (const auto& row : tables.at("evaluations")) {
    const int64_t id = row.value("id", int64_t{0});
    const auto problem = [&](const std::string& what) {
      report.problems.push_back(fmt::format("evaluation {}: {}", id, what));
    };
    if (!row.contains("detail_digest") || !row["detail_digest"].is_string()) {
      problem("it names no detail blob");
      continue;
    }
    const std::string digest = row["detail_digest"].get<std::string>();
    if (!listed.contains("blobs/" + digest)) {
      continue; // reported above
    }
    recorded_outcome recorded;
    try {
      recorded = read(read_file(dir / "blobs" / digest));
    } catch (const std::exception& e) {
      problem(fmt::format("its detail blob cannot be read as a record: {}", e.what()));
      continue;
    }
    if (recorded.verdict != row.value("verdict", std::string())) {
      problem(fmt::format("the row says {} but its detail blob says {}", row.value("verdict", ""),
                          nlohmann::json(recorded.verdict).dump()));
    }
    if (recorded.reason != row.value("reason", std::string())) {
      problem(fmt::format("the row's reason {} is not its detail blob's {}",
                          row.value("reason", ""), nlohmann::json(recorded.reason).dump()));
    }
    const nlohmann::json speedup = row.value("speedup", nlohmann::json());
    const nlohmann::json base = row.value("baseline_median", nlohmann::json());
    const nlohmann::json cand = row.value("candidate_median", nlohmann::json());
    if (base.is_number() && cand.is_number() && speedup.is_number() &&
        cand.get<double>() > 0 &&
        !same_number(speedup, base.get<double>() / cand.get<double>())) {
      problem(fmt::format("its speedup {} is not the ratio of its medians ({} / {})",
                          speedup.dump(), base.dump(), cand.dump()));
    }
    for (const auto& [column, value, key] :
         {std::tuple{"speedup", recorded.speedup, "speedup"},
          std::tuple{"baseline_median", recorded.baseline_median, "median_baseline_s"},
          std::tuple{"candidate_median", recorded.candidate_median, "median_candidate_s"}}) {
      if (value && !same_number(row.value(column, nlohmann::json()), *value)) {
        problem(fmt::format("its {} {} is not the {} {} of its detail blob", column,
                            row.value(column, nlohmann::json()).dump(), key,
                            nlohmann::json(*value).dump()));
      }
    }
  }
}

} // namespace

evidence_report store::export_evidence(int64_t run, const fs::path& out,
                                       const record_reader& read) const {
  auto& db = m_impl->db;
  if (!find_run(run)) {
    fail_input("no run {} in the store {}", run, m_impl->dir.string());
  }
  prepare_empty_folder(out);

  nlohmann::json tables = nlohmann::json::object();
  std::set<std::string> digests;
  std::map<std::string, int64_t> sizes;
  {
    detail::read_snapshot snapshot(db);
    for (const auto& [table, where] : run_selections()) {
      detail::statement s(db,
                          fmt::format("SELECT * FROM \"{}\" WHERE {} ORDER BY id", table, where));
      s.bind(1, run);
      tables[table] = rows_json(s);
    }
    for (const auto& [table, column] : detail::blob_columns(db)) {
      if (!tables.contains(table)) {
        continue;
      }
      for (const auto& row : tables[table]) {
        if (row.contains(column) && row[column].is_string()) {
          digests.insert(row[column].get<std::string>());
        }
      }
    }
    detail::statement s(db, "SELECT size FROM blobs WHERE digest = ?");
    for (const auto& digest : digests) {
      s.reset();
      s.bind(1, digest);
      sizes[digest] = s.step() ? s.column_int(0) : -1;
    }
  }

  nlohmann::json blobs = nlohmann::json::array();
  for (const auto& digest : digests) {
    blobs.push_back({{"digest", digest}, {"size", sizes.at(digest)}});
  }
  const nlohmann::json document = {
      {"format", format_name},
      {"format_version", format_version},
      {"schema_version", detail::schema_version(db)},
      {"tool_version", KBLASTER_VERSION},
      {"exported", detail::now_utc()},
      {"run", run},
      {"tables", tables},
      {"blobs", blobs},
  };
  // A blob that is missing or corrupt ends the export with nothing left behind: never a partial
  // folder that looks like evidence.
  try {
    write_file_atomic(out / "rows.json", document.dump(2) + "\n");
    for (const auto& digest : digests) {
      m_impl->blobs.export_to(digest, out, fs::path("blobs") / digest);
    }
  } catch (...) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(out, ec)) {
      fs::remove_all(entry.path(), ec);
    }
    throw;
  }

  // Hashed from the files as written, so the manifest vouches for what is on disk.
  std::vector<std::string> lines;
  for (const auto& entry : fs::recursive_directory_iterator(out)) {
    if (entry.is_regular_file()) {
      lines.push_back(
          fmt::format("{}  {}\n", sha256_file(entry.path()), manifest_path(out, entry.path())));
    }
  }
  std::sort(lines.begin(), lines.end(),
            [](const std::string& a, const std::string& b) { return a.substr(66) < b.substr(66); });
  std::string manifest;
  for (const auto& line : lines) {
    manifest += line;
  }
  write_file_atomic(out / "MANIFEST", manifest);
  return check_evidence(out, read);
}

evidence_report check_evidence(const fs::path& dir, const record_reader& read) {
  evidence_report report;
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    fail_input("{}: not an evidence folder (no such folder, or a symlink)", dir.string());
  }
  const fs::path manifest_file = dir / "MANIFEST";
  if (lstat(manifest_file.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    report.problems.push_back("MANIFEST is missing or not a regular file");
    return report;
  }
  const std::string manifest = read_file(manifest_file);
  report.manifest_digest = sha256_hex(manifest);

  std::map<std::string, std::string> listed; // path -> digest
  std::istringstream lines(manifest);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    const std::string digest = line.substr(0, 64);
    if (line.size() < 67 || !detail::is_digest(digest) || line.compare(64, 2, "  ") != 0) {
      report.problems.push_back(fmt::format("MANIFEST line {} is malformed", number));
      continue;
    }
    const std::string path = line.substr(66);
    try {
      detail::check_relative_path(path);
    } catch (const input_error& e) {
      report.problems.push_back(fmt::format("MANIFEST line {}: {}", number, e.what()));
      continue;
    }
    if (path == "MANIFEST" || !listed.emplace(path, digest).second) {
      report.problems.push_back(
          fmt::format("MANIFEST line {}: {} is listed twice or lists MANIFEST", number, path));
    }
  }

  for (const auto& [path, digest] : listed) {
    const fs::path file = dir / path;
    if (lstat(file.c_str(), &st) != 0) {
      report.problems.push_back(fmt::format("{} is missing", path));
      continue;
    }
    if (!S_ISREG(st.st_mode)) {
      report.problems.push_back(
          fmt::format("{} is not a regular file (symlinks are refused)", path));
      continue;
    }
    ++report.files;
    if (sha256_file(file) != digest) {
      report.problems.push_back(
          fmt::format("{} has changed: its SHA-256 differs from MANIFEST", path));
    }
    if (path.starts_with("blobs/") && path.substr(6) != digest) {
      report.problems.push_back(fmt::format("{} is not named by its SHA-256 {}", path, digest));
    }
  }

  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    const std::string path = manifest_path(dir, entry.path());
    if (entry.is_symlink()) {
      report.problems.push_back(fmt::format("{} is a symlink", path));
    } else if (entry.is_regular_file()) {
      if (path != "MANIFEST" && !listed.contains(path)) {
        report.problems.push_back(fmt::format("{} is not listed in MANIFEST", path));
      }
    } else if (!entry.is_directory()) {
      report.problems.push_back(fmt::format("{} is not a regular file", path));
    }
  }

  if (!listed.contains("rows.json")) {
    report.problems.push_back("rows.json is not listed in MANIFEST");
  } else if (lstat((dir / "rows.json").c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    try {
      const auto document = nlohmann::json::parse(read_file(dir / "rows.json"));
      if (document.value("format", "") != format_name) {
        report.problems.push_back("rows.json is not a kblaster evidence document");
      }
      report.run = document.value("run", int64_t{0});
      check_rows_against_blobs(dir, document, listed, read, report);
      for (const auto& blob : document.at("blobs")) {
        const std::string digest = blob.at("digest").get<std::string>();
        const std::string path = "blobs/" + digest;
        std::error_code ec;
        if (!listed.contains(path)) {
          report.problems.push_back(
              fmt::format("rows.json references blob {}, which is not in the folder", digest));
        } else if (static_cast<int64_t>(fs::file_size(dir / path, ec)) !=
                       blob.at("size").get<int64_t>() ||
                   ec) {
          report.problems.push_back(
              fmt::format("blob {} does not have the size rows.json records", digest));
        }
      }
    } catch (const std::exception& e) {
      report.problems.push_back(fmt::format("rows.json cannot be read: {}", e.what()));
    }
  }
  return report;
}

} // namespace kb::store
