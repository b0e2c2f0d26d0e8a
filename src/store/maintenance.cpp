// verify and gc: the checks that the store still holds what its rows say, and the removal of what
// nothing references.
#include "store/detail/impl.hpp"

#include "common/error.hpp"
#include "common/sha256.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include <sys/stat.h>
#include <unistd.h>

namespace kb::store {
namespace {

std::map<std::string, int64_t> catalogue(detail::connection& db) {
  std::map<std::string, int64_t> out;
  detail::statement s(db, "SELECT digest, size FROM blobs");
  while (s.step()) {
    out.emplace(s.column_text(0), s.column_int(1));
  }
  return out;
}

std::set<std::string> referenced_digests(detail::connection& db) {
  std::set<std::string> out;
  for (const auto& [table, column] : detail::blob_columns(db)) {
    detail::statement s(
        db, fmt::format("SELECT DISTINCT \"{1}\" FROM \"{0}\" WHERE \"{1}\" IS NOT NULL", table,
                        column));
    while (s.step()) {
      out.insert(s.column_text(0));
    }
  }
  return out;
}

// Seconds since the file's last modification; nullopt when it is gone.
std::optional<double> age_of(const fs::path& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    return std::nullopt;
  }
  const auto modified = std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
  return std::chrono::duration<double>(std::chrono::system_clock::now() - modified).count();
}

} // namespace

verify_report store::verify() const {
  auto& db = m_impl->db;
  verify_report report;
  // PostgreSQL enforces foreign keys on every write and checks its own pages; SQLite is asked.
  const bool sqlite = db.kind() == detail::dialect::sqlite;
  if (sqlite) {
    detail::statement s(db, "PRAGMA integrity_check");
    while (s.step()) {
      if (s.column_text(0) != "ok") {
        report.database.push_back("integrity_check: " + s.column_text(0));
      }
    }
  }
  if (sqlite) {
    detail::statement s(db, "PRAGMA foreign_key_check");
    while (s.step()) {
      report.database.push_back(
          fmt::format("foreign_key_check: row {} of {} references a missing row of {}",
                      s.column_optional_int(1).value_or(0), s.column_text(0), s.column_text(2)));
    }
  }
  // Rows are read before the files are listed: a blob's file is always written before the row
  // that names it, so a row read here has its file by the time the folder is walked.
  std::map<std::string, int64_t> catalogued;
  std::set<std::string> referenced;
  {
    detail::read_snapshot snapshot(db);
    catalogued = catalogue(db);
    referenced = referenced_digests(db);
  }
  std::set<std::string> present;
  for (const auto& file : m_impl->blobs.files()) {
    const std::string digest = m_impl->blobs.digest_of_path(file);
    if (digest.empty() || !catalogued.contains(digest)) {
      report.stray.push_back(file);
      continue;
    }
    std::error_code ec;
    const auto size = fs::file_size(file, ec);
    if (ec) {
      continue; // removed meanwhile by gc, which removes only unreferenced blobs
    }
    ++report.blobs_checked;
    present.insert(digest);
    if (static_cast<int64_t>(size) != catalogued.at(digest) || sha256_file(file) != digest) {
      report.corrupt.push_back(digest);
    }
  }
  for (const auto& digest : referenced) {
    if (!present.contains(digest)) {
      report.missing.push_back(digest);
    }
  }
  std::sort(report.corrupt.begin(), report.corrupt.end());
  std::sort(report.stray.begin(), report.stray.end());
  return report;
}

gc_report store::gc(std::chrono::seconds grace, bool dry_run) {
  auto& db = m_impl->db;
  // Checking the foreign keys of every deleted blob costs a scan of each referencing table per
  // blob; foreign_key_check below proves the same for the whole deletion at once.
  // (PostgreSQL checks each deletion with an index.)
  const bool sqlite = db.kind() == detail::dialect::sqlite;
  struct foreign_keys_off {
    explicit foreign_keys_off(detail::connection& c) : db(c) {
      if (db.kind() == detail::dialect::sqlite) {
        db.exec("PRAGMA foreign_keys = OFF");
      }
    }
    ~foreign_keys_off() {
      if (db.kind() == detail::dialect::sqlite) {
        db.try_exec("PRAGMA foreign_keys = ON");
      }
    }
    detail::connection& db;
  } keys_off(db);

  gc_report report;
  const double grace_seconds = static_cast<double>(grace.count());
  detail::transaction tx(db);
  if (!sqlite) {
    // The write lock SQLite's BEGIN IMMEDIATE takes: no blob is catalogued meanwhile.
    db.exec("LOCK TABLE blobs IN EXCLUSIVE MODE");
  }
  const auto catalogued = catalogue(db);
  const auto referenced = referenced_digests(db);
  std::vector<fs::path> doomed;
  for (const auto& [digest, size] : catalogued) {
    if (referenced.contains(digest)) {
      continue;
    }
    const fs::path path = m_impl->blobs.path_of(digest);
    if (const auto age = age_of(path); age && *age < grace_seconds) {
      ++report.kept_recent;
      continue;
    }
    ++report.removed_blobs;
    report.removed_bytes += static_cast<uint64_t>(size);
    detail::statement(db, "DELETE FROM blobs WHERE digest = ?").bind(1, digest).run();
    doomed.push_back(path);
  }
  for (const auto& file : m_impl->blobs.files()) {
    const std::string digest = m_impl->blobs.digest_of_path(file);
    if (!digest.empty() && catalogued.contains(digest)) {
      continue;
    }
    if (const auto age = age_of(file); age && *age < grace_seconds) {
      ++report.kept_recent;
      continue;
    }
    ++report.removed_stray;
    doomed.push_back(file);
  }
  if (sqlite) {
    detail::statement check(db, "PRAGMA foreign_key_check");
    if (check.step()) {
      fail("gc: removing unreferenced blobs would break a reference from {} (nothing was removed)",
           check.column_text(0));
    }
  }
  if (dry_run) {
    return report;
  }
  // Files go while the write lock is held: a writer that stores the same bytes afterwards
  // writes them anew.
  for (const auto& path : doomed) {
    unlink(path.c_str());
  }
  tx.commit();
  return report;
}

} // namespace kb::store
