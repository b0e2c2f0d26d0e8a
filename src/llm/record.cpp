#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/sha256.hpp"
#include "llm/llm.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fcntl.h>
#include <unistd.h>

namespace kb::llm {

namespace {

constexpr std::string_view index_name = "index.jsonl";

void append_line(const fs::path& file, const std::string& line) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    fail("cannot open {}: {}", file.string(), std::strerror(errno));
  }
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      const int e = errno;
      ::close(fd);
      fail("cannot write {}: {}", file.string(), std::strerror(e));
    }
    done += static_cast<size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
}

} // namespace

std::string request_digest(const nlohmann::json& request) {
  return sha256_hex(request.dump());
}

file_recorder::file_recorder(fs::path dir) : m_dir(std::move(dir)) {
  std::error_code ec;
  fs::create_directories(m_dir, ec);
  if (ec) {
    fail_input("cannot create the exchange record folder {}: {}", m_dir.string(), ec.message());
  }
  std::ifstream index(m_dir / index_name);
  std::string line;
  while (std::getline(index, line)) {
    m_count += line.empty() ? 0 : 1;
  }
}

void file_recorder::record(const nlohmann::json& request, const nlohmann::json& response,
                           const nlohmann::json& meta) {
  const nlohmann::json exchange{{"request", request}, {"response", response}, {"meta", meta}};
  const std::string content = exchange.dump(2) + "\n";
  const std::string digest = sha256_hex(content);
  const std::string name = digest + ".json";
  std::lock_guard lock(m_mutex);
  if (!fs::exists(m_dir / name)) {
    write_file_atomic(m_dir / name, content);
  }
  const bool has_meta = meta.is_object();
  const nlohmann::json entry{{"n", m_count},
                             {"file", name},
                             {"request_digest", has_meta ? meta.value("request_digest", "") : ""},
                             {"status", has_meta ? meta.value("status", "") : ""},
                             {"http_status", has_meta ? meta.value("http_status", 0) : 0}};
  append_line(m_dir / index_name, entry.dump() + "\n");
  ++m_count;
}

std::vector<recorded_exchange> load_record(const fs::path& dir) {
  const fs::path index_file = dir / index_name;
  if (!fs::exists(index_file)) {
    fail_input("{} is not an exchange record: it has no {}", dir.string(), index_name);
  }
  std::vector<recorded_exchange> out;
  std::ifstream index(index_file);
  std::string line;
  int line_number = 0;
  while (std::getline(index, line)) {
    ++line_number;
    if (line.empty()) {
      continue;
    }
    nlohmann::json entry;
    try {
      entry = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      fail_input("{}:{}: not JSON: {}", index_file.string(), line_number, e.what());
    }
    const std::string name = entry.value("file", "");
    if (name.size() != 64 + 5 || name.find('/') != std::string::npos) {
      fail_input("{}:{}: no exchange file named", index_file.string(), line_number);
    }
    const fs::path file = dir / name;
    if (!fs::exists(file)) {
      fail_input("{}:{}: {} is missing", index_file.string(), line_number, file.string());
    }
    const std::string content = read_file(file);
    if (sha256_hex(content) + ".json" != name) {
      fail_input("{}: its content does not match its name (edited or damaged)", file.string());
    }
    nlohmann::json exchange;
    try {
      exchange = nlohmann::json::parse(content);
    } catch (const nlohmann::json::exception& e) {
      fail_input("{}: not JSON: {}", file.string(), e.what());
    }
    if (!exchange.is_object()) {
      fail_input("{}: not an exchange object", file.string());
    }
    out.push_back({exchange.value("request", nlohmann::json::object()),
                   exchange.value("response", nlohmann::json::object()),
                   exchange.value("meta", nlohmann::json::object())});
  }
  return out;
}

} // namespace kb::llm
