#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace kb {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path);
// Writes through a temporary file in the same folder, fsyncs it, renames it over `path` and
// fsyncs the folder: after a crash the file holds either the old or the new bytes.
void write_file_atomic(const fs::path& path, std::string_view bytes, unsigned mode = 0644);
void fsync_directory(const fs::path& dir);
// write_file_atomic, unless `path` already holds exactly `bytes` (generated sources under the
// compile cache: an unchanged file keeps its time stamp).
void write_file_if_changed(const fs::path& path, std::string_view bytes);

// A fresh private folder under `parent` (or the system temporary folder), removed with the object.
class temp_dir {
public:
  explicit temp_dir(const std::string& prefix,
                    const std::optional<fs::path>& parent = std::nullopt);
  ~temp_dir();
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const fs::path& path() const { return m_path; }
  void keep() { m_keep = true; }

private:
  fs::path m_path;
  bool m_keep = false;
};

// The project folder that holds tasks/ and include/kblaster: --root, else $KBLASTER_ROOT, else the
// first folder above the working directory or above the executable that has both.
fs::path find_project_root(const std::optional<fs::path>& explicit_root = std::nullopt);

// Where build products and compiled modules are cached: $KBLASTER_CACHE, else
// $XDG_CACHE_HOME/kblaster, else ~/.cache/kblaster.
fs::path default_cache_dir();

} // namespace kb
