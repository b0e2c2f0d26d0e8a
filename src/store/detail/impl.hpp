// What store.cpp, maintenance.cpp and evidence.cpp share: the open store's state.
#pragma once

#include "store/detail/cas.hpp"
#include "store/detail/database.hpp"
#include "store/store.hpp"

#include <string>
#include <vector>

namespace kb::store {

struct store::impl {
  // `url` empty: SQLite in dir/store.sqlite; else PostgreSQL, with the blobs under dir.
  impl(fs::path dir, std::string url, int busy_timeout_ms);

  fs::path dir;
  std::string url;
  detail::connection db;
  detail::cas blobs;

  // Stores the bytes and catalogues them, inside the caller's transaction when there is one.
  blob_ref put(std::string_view bytes);
};

namespace detail {

// The current time, UTC, ISO 8601 with milliseconds.
std::string now_utc();

struct blob_column {
  std::string table;
  std::string column;
};
// Every column that references blobs(digest), found through the schema's foreign keys.
std::vector<blob_column> blob_columns(connection& db);

// The memory's lookup (parameters: family, gpu[, strategy]), one search of the index
// experiences_by_family_gpu_strategy on all three columns or on its prefix.
std::string experiences_query(bool by_strategy);

// This process, as recorded in runs.owner: host, boot, pid and the process's start time, so that
// neither a reboot nor a reused pid hides a dead owner.
std::string process_owner();
// Whether the owner of a run is a process of this machine that is gone.
bool owner_is_dead(const std::string& owner);

} // namespace detail
} // namespace kb::store
