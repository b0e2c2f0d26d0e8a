// The store's schema as an ordered list of migrations, written once for SQLite and PostgreSQL;
// PRAGMA user_version (SQLite) or the table kb_schema (PostgreSQL) holds the number of migrations
// applied. docs/store.md describes the resulting tables.
#pragma once

#include "store/detail/database.hpp"

namespace kb::store::detail {

int latest_schema_version();
int schema_version(connection& db);

// Applies the migrations after the database's version, up to `target`, each in its own write
// transaction. Refuses a database written by a newer kblaster.
void migrate(connection& db, int target);

} // namespace kb::store::detail
