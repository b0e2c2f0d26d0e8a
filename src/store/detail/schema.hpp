// The store's SQLite schema as an ordered list of migrations; PRAGMA user_version holds the number
// of migrations applied. docs/store.md describes the resulting tables.
#pragma once

#include "store/detail/sqlite.hpp"

namespace kb::store::detail {

int latest_schema_version();
int schema_version(connection& db);

// Applies the migrations after the database's version, up to `target`, each in its own write
// transaction. Refuses a database written by a newer kblaster.
void migrate(connection& db, int target);

} // namespace kb::store::detail
