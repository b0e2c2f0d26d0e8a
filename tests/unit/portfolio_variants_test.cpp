// Every candidate variant under portfolio/variants (<task>_<idea>.cu) belongs to a task, compiles
// for the default architecture through the project's build path without warnings, exports the
// candidate ABI and refuses arguments it cannot handle before any device work.
#include "build/build.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "task/task.hpp"

#include <kblaster/candidate.h>

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cctype>

namespace kb {
namespace {

const fs::path root = KBLASTER_SOURCE_DIR;

std::vector<std::string> variant_files() {
  std::vector<std::string> out;
  const fs::path dir = root / "portfolio" / "variants";
  if (fs::is_directory(dir)) {
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() == ".cu") {
        out.push_back(e.path().filename().string());
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

class portfolio_variant : public ::testing::TestWithParam<std::string> {};

TEST_P(portfolio_variant, compiles_and_exports_the_candidate_abi) {
  const std::string file = GetParam();
  const std::string id = file.substr(0, file.find('_'));
  const auto c = task::find_task(root, id);
  static build::compiler comp(build::detect_toolchain(), default_cache_dir());
  auto req =
      build::candidate_request(root, c, read_file(root / "portfolio" / "variants" / file), file);
  req.timeout = std::chrono::seconds(600);
  const auto res = comp.compile(req);
  ASSERT_TRUE(res.ok()) << file << ":\n" << res.log;
  EXPECT_EQ(res.log.find("warning"), std::string::npos) << res.log;

  void* lib = dlopen(res.binary.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  const auto launch = reinterpret_cast<int (*)(const kb_args*)>(dlsym(lib, "kb_launch"));
  const auto info = reinterpret_cast<const char* (*)()>(dlsym(lib, "kb_candidate_info"));
  ASSERT_NE(launch, nullptr);
  ASSERT_NE(info, nullptr);
  EXPECT_FALSE(std::string(info()).empty());
  // Missing inputs and outputs and float64 storage are refused before any device work.
  kb_args none{};
  none.abi_version = KB_ABI_VERSION;
  EXPECT_NE(launch(&none), 0);
  kb_tensor t{};
  t.dtype = KB_FLOAT64;
  t.ndim = 2;
  t.shape[0] = t.shape[1] = 4;
  t.strides[0] = 4;
  t.strides[1] = 1;
  std::vector<kb_tensor> ins(c.inputs.size(), t);
  kb_args f64{};
  f64.abi_version = KB_ABI_VERSION;
  f64.num_inputs = static_cast<int32_t>(ins.size());
  f64.inputs = ins.data();
  f64.num_outputs = 1;
  f64.outputs = &t;
  EXPECT_NE(launch(&f64), 0);
  dlclose(lib);
}

std::string case_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param.substr(0, info.param.size() - 3);
  for (auto& ch : n) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) {
      ch = '_';
    }
  }
  return n;
}

INSTANTIATE_TEST_SUITE_P(variants, portfolio_variant, ::testing::ValuesIn(variant_files()),
                         case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(portfolio_variant);

} // namespace
} // namespace kb
