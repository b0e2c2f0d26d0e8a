// The content-addressed blob folder: each blob is a file named by the SHA-256 of its bytes,
// <root>/ab/<62 more hex digits>, written once and read-only afterwards.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace kb::store::detail {

namespace fs = std::filesystem;

bool is_digest(std::string_view text);

// Throws kb::input_error unless `relative` is a non-empty relative path without `.` or `..`
// components.
void check_relative_path(const fs::path& relative);

class cas {
public:
  explicit cas(fs::path root);
  const fs::path& root() const { return m_root; }

  fs::path path_of(std::string_view digest) const;
  bool exists(std::string_view digest) const;
  // Present and still hashing to its name.
  bool intact(std::string_view digest) const;
  // Stores the bytes unless a blob with their digest exists; returns the digest. A present blob's
  // modification time is refreshed, because gc's grace period counts from it.
  std::string put(std::string_view bytes) const;
  // The blob's bytes, checked against its name; throws kb::error when missing or corrupt.
  std::string get(std::string_view digest) const;
  // Writes the blob to out_dir/relative, refusing symlinks on the way and at the destination.
  void export_to(std::string_view digest, const fs::path& out_dir, const fs::path& relative) const;
  // Every file under the root: blobs and leftovers (temporary files of interrupted writes).
  std::vector<fs::path> files() const;
  // The digest a file's place in the folder names, or "" for a file that is no blob.
  std::string digest_of_path(const fs::path& file) const;

private:
  fs::path m_root;
};

} // namespace kb::store::detail
