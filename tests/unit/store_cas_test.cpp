#include "common/error.hpp"
#include "common/sha256.hpp"
#include "store/detail/cas.hpp"
#include "store_test_support.hpp"

#include <fstream>

#include <sys/stat.h>

namespace kb::store::testing {
namespace {

void flip_first_byte(const fs::path& file) {
  fs::permissions(file, fs::perms::owner_write, fs::perm_options::add);
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x01);
  f.seekp(0);
  f.write(&c, 1);
}

size_t count_files(const fs::path& dir) {
  size_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    n += e.is_regular_file() ? 1 : 0;
  }
  return n;
}

TEST_F(store_test, a_blob_is_named_by_its_sha256_and_stored_once) {
  store st(store_dir());
  const auto a = st.put("hello");
  EXPECT_EQ(a.digest, sha256_hex("hello"));
  EXPECT_EQ(a.size, 5u);
  EXPECT_EQ(st.path_of(a.digest),
            store_dir() / "blobs" / a.digest.substr(0, 2) / a.digest.substr(2));
  EXPECT_TRUE(st.exists(a.digest));
  EXPECT_EQ(st.get(a.digest), "hello");
  EXPECT_EQ(st.put("hello").digest, a.digest);
  EXPECT_EQ(count_files(store_dir() / "blobs"), 1u);
  EXPECT_EQ(query_count(store_dir(), "SELECT count(*) FROM blobs"), 1);
  EXPECT_EQ(query_count(store_dir(), "SELECT size FROM blobs"), 5);

  // Blobs are read-only on disk, and nothing temporary is left behind.
  struct stat info {};
  ASSERT_EQ(stat(st.path_of(a.digest).c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0444u);

  const std::string binary("\0\x01\xff zero bytes inside", 20);
  const auto b = st.put(binary);
  EXPECT_EQ(st.get(b.digest), binary);
  EXPECT_EQ(count_files(store_dir() / "blobs"), 2u);
}

TEST_F(store_test, put_file_stores_the_file_bytes) {
  store st(store_dir());
  const fs::path file = tmp() / "kernel.cu";
  std::ofstream(file) << "__global__ void k() {}\n";
  const auto ref = st.put_file(file);
  EXPECT_EQ(ref.digest, sha256_file(file));
  EXPECT_EQ(st.get(ref.digest), "__global__ void k() {}\n");
  EXPECT_THROW(st.put_file(tmp() / "absent.cu"), input_error);
}

TEST_F(store_test, unknown_and_malformed_digests) {
  store st(store_dir());
  const std::string absent = sha256_hex("never stored");
  EXPECT_FALSE(st.exists(absent));
  EXPECT_THROW(st.get(absent), error);
  EXPECT_THROW(st.path_of("../../etc/passwd"), input_error);
  EXPECT_THROW(st.path_of(std::string(64, 'A')),
               input_error); // upper case is not how digests are written
}

TEST_F(store_test, get_refuses_a_corrupt_blob_and_put_repairs_it) {
  store st(store_dir());
  const auto ref = st.put("precious bytes");
  flip_first_byte(st.path_of(ref.digest));
  EXPECT_THROW(st.get(ref.digest), error);
  st.put("precious bytes");
  EXPECT_EQ(st.get(ref.digest), "precious bytes");
}

TEST_F(store_test, verify_reports_every_corrupt_and_every_missing_blob) {
  store st(store_dir());
  const auto r = record_sample_run(st);
  auto clean = st.verify();
  EXPECT_TRUE(clean.ok());
  EXPECT_EQ(clean.blobs_checked,
            8); // the contract, two sources, binary, log, samples, detail, artifact
  EXPECT_TRUE(clean.stray.empty());

  flip_first_byte(st.path_of(r.binary));
  flip_first_byte(st.path_of(r.log));
  fs::remove(st.path_of(r.candidate_source));
  fs::remove(st.path_of(r.artifact));
  // A file an interrupted write left behind is reported, but is no corruption.
  fs::create_directories(store_dir() / "blobs" / "ab");
  std::ofstream(store_dir() / "blobs" / "ab" / ".tmp-leftover") << "partial";

  const auto report = st.verify();
  EXPECT_FALSE(report.ok());
  std::vector<std::string> corrupt{r.binary, r.log};
  std::sort(corrupt.begin(), corrupt.end());
  EXPECT_EQ(report.corrupt, corrupt);
  std::vector<std::string> missing{r.candidate_source, r.artifact};
  std::sort(missing.begin(), missing.end());
  EXPECT_EQ(report.missing, missing);
  EXPECT_EQ(report.stray.size(), 1u);
  EXPECT_TRUE(report.database.empty());
}

TEST_F(store_test, verify_finds_a_truncated_blob) {
  store st(store_dir());
  const auto ref = st.put("some bytes that will be cut short");
  st.attach(st.begin_run("eval", {}), "report", ref.digest);
  fs::permissions(st.path_of(ref.digest), fs::perms::owner_write, fs::perm_options::add);
  fs::resize_file(st.path_of(ref.digest), 4);
  EXPECT_EQ(st.verify().corrupt, std::vector<std::string>{ref.digest});
}

TEST_F(store_test, verify_finds_a_row_that_names_an_uncatalogued_blob) {
  store st(store_dir());
  const int64_t run = st.begin_run("eval", {});
  const std::string absent = sha256_hex("never stored");
  {
    // A connection without foreign keys, as a buggy or foreign writer would have.
    detail::connection db(store_dir() / "store.sqlite", 10000);
    detail::statement(
        db, "INSERT INTO artifacts (run, name, digest, created) VALUES (?, 'x', ?, 'now')")
        .bind_all(run, absent)
        .run();
  }
  const auto report = st.verify();
  EXPECT_FALSE(report.ok());
  EXPECT_EQ(report.missing, std::vector<std::string>{absent});
  ASSERT_EQ(report.database.size(), 1u);
  EXPECT_NE(report.database[0].find("artifacts"), std::string::npos);
}

TEST_F(store_test, export_refuses_absolute_paths_dotdot_and_symlinks) {
  store st(store_dir());
  const auto ref = st.put("exported bytes");
  detail::cas blobs(store_dir() / "blobs");
  const fs::path out = tmp() / "out";
  fs::create_directories(out);
  EXPECT_THROW(blobs.export_to(ref.digest, out, "/etc/evil"), input_error);
  EXPECT_THROW(blobs.export_to(ref.digest, out, "a/../../evil"), input_error);
  EXPECT_THROW(blobs.export_to(ref.digest, out, "./a"), input_error);
  EXPECT_THROW(blobs.export_to(ref.digest, out, ""), input_error);

  fs::create_directories(tmp() / "elsewhere");
  fs::create_directory_symlink(tmp() / "elsewhere", out / "link");
  EXPECT_THROW(blobs.export_to(ref.digest, out, "link/file"), input_error);
  fs::create_symlink(tmp() / "elsewhere" / "target", out / "file-link");
  EXPECT_THROW(blobs.export_to(ref.digest, out, "file-link"), input_error);
  EXPECT_TRUE(fs::is_empty(tmp() / "elsewhere"));

  blobs.export_to(ref.digest, out, "blobs/x");
  EXPECT_EQ(read_file(out / "blobs" / "x"), "exported bytes");
  EXPECT_THROW(blobs.export_to(ref.digest, out, "blobs/x"), input_error); // never overwrites
}

} // namespace
} // namespace kb::store::testing
