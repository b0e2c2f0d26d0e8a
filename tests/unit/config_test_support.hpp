// What the config-file tests share: writing a file of a test's own, and the message of the
// kb::input_error a call throws.
#pragma once

#include "common/error.hpp"
#include "common/fs.hpp"

#include <string>

namespace kb::testing {

// The message of the kb::input_error `f` throws ("" when it throws none).
template <class F> std::string input_error_of(F f) {
  try {
    f();
  } catch (const kb::input_error& e) {
    return e.what();
  }
  return "";
}

// `text` as the file `name` under `dir` (folders made as needed).
inline fs::path write_config(const temp_dir& dir, const std::string& name,
                             const std::string& text) {
  const auto file = dir.path() / name;
  write_file_atomic(file, text);
  return file;
}

} // namespace kb::testing
