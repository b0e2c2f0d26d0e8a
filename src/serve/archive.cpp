// Evidence as a download: the exported folder as one uncompressed POSIX tar archive.
#include "serve/serve.hpp"

#include "common/error.hpp"
#include "common/fs.hpp"
#include "eval/eval.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace kb::serve {

namespace {

constexpr size_t block = 512; // [bytes] tar's record unit

void octal(char* field, size_t width, uint64_t value) {
  // width - 1 digits and a NUL, as ustar writes them.
  const std::string s = fmt::format("{:0{}o}", value, width - 1);
  if (s.size() > width - 1) {
    fail("tar: value {} does not fit a {}-byte field", value, width);
  }
  std::memcpy(field, s.data(), s.size());
}

void header(std::string& out, const std::string& name, char type, uint64_t size, uint32_t mode) {
  char h[block] = {};
  std::string prefix;
  std::string rest = name;
  if (rest.size() > 100) { // ustar: up to 155 bytes of folders in the prefix field
    const auto cut = rest.rfind('/', rest.size() - 1 > 155 ? 155 : rest.size() - 1);
    if (cut == std::string::npos || rest.size() - cut - 1 > 100 || cut > 155) {
      fail("tar: path too long for ustar: {}", name);
    }
    prefix = rest.substr(0, cut);
    rest = rest.substr(cut + 1);
  }
  std::memcpy(h, rest.data(), rest.size());
  octal(h + 100, 8, mode);
  octal(h + 108, 8, 0); // uid
  octal(h + 116, 8, 0); // gid
  octal(h + 124, 12, size);
  octal(h + 136, 12, 0); // mtime: fixed, so the archive depends only on the content
  std::memset(h + 148, ' ', 8);
  h[156] = type;
  std::memcpy(h + 257, "ustar", 6);
  std::memcpy(h + 263, "00", 2);
  std::memcpy(h + 345, prefix.data(), prefix.size());
  unsigned sum = 0;
  for (unsigned char c : h) {
    sum += c;
  }
  const std::string s = fmt::format("{:06o}", sum);
  std::memcpy(h + 148, s.data(), 6);
  h[154] = '\0';
  h[155] = ' ';
  out.append(h, block);
}

} // namespace

std::string tar_folder(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> entries;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    entries.push_back(e.path());
  }
  std::sort(entries.begin(), entries.end());
  std::string out;
  header(out, prefix + "/", '5', 0, 0755);
  for (const auto& p : entries) {
    const auto st = fs::symlink_status(p);
    const std::string name = prefix + "/" + fs::relative(p, dir).generic_string();
    if (fs::is_directory(st)) {
      header(out, name + "/", '5', 0, 0755);
    } else if (fs::is_regular_file(st)) {
      const std::string bytes = read_file(p);
      header(out, name, '0', bytes.size(), 0644);
      out += bytes;
      out.append((block - bytes.size() % block) % block, '\0');
    } else {
      fail("tar: {} is neither a file nor a folder", p.string());
    }
  }
  out.append(2 * block, '\0');
  return out;
}

std::string evidence_archive(const store::store& st, int64_t run) {
  if (!st.find_run(run)) {
    throw not_found(fmt::format("no run {} in the store", run));
  }
  temp_dir tmp("kblaster-evidence-");
  const fs::path out = tmp.path() / "evidence";
  const auto report = st.export_evidence(run, out, eval::recorded_outcome_of);
  if (!report.ok()) {
    fail("evidence export of run {}: {}", run, fmt::join(report.problems, "; "));
  }
  return tar_folder(out, fmt::format("run-{}-evidence", run));
}

} // namespace kb::serve
