#include "llm/llm.hpp"

#include <gtest/gtest.h>

namespace kb::llm {
namespace {

const std::string kernel = "extern \"C\" int kb_launch(const kb_args* a) { return 0; }\n";

TEST(llm_answer, reads_a_fenced_json_object_and_a_cuda_fence) {
  const auto a =
      parse_answer("Sure.\n```json\n{\"strategy\": \"normalize.one_pass\", \"hypothesis\": "
                   "\"fewer reads\", \"predicted_speedup\": 1.4, \"params\": {\"block\": 512}}\n"
                   "```\nThe code:\n```cuda\n" +
                   kernel + "```\nDone.");
  EXPECT_EQ(a.code, kernel);
  EXPECT_FALSE(a.code_unterminated);
  EXPECT_TRUE(a.has_json);
  EXPECT_EQ(a.strategy, "normalize.one_pass");
  EXPECT_EQ(a.hypothesis, "fewer reads");
  EXPECT_DOUBLE_EQ(*a.predicted_speedup, 1.4);
  EXPECT_EQ(a.params["block"], 512);
  EXPECT_TRUE(a.missing.empty());
}

TEST(llm_answer, reads_bare_json_and_other_code_tags) {
  for (const std::string tag : {"cpp", "c++", "CUDA", "cu", ""}) {
    const auto a =
        parse_answer("{\"strategy\": \"s\", \"hypothesis\": \"h {braces} \\\"quoted\\\"\", "
                     "\"predicted_speedup\": \"~1.25x\"}\n\n```" +
                     tag + "\n" + kernel + "```");
    EXPECT_EQ(a.code, kernel) << tag;
    EXPECT_EQ(a.strategy, "s") << tag;
    EXPECT_EQ(a.hypothesis, "h {braces} \"quoted\"") << tag;
    EXPECT_DOUBLE_EQ(a.predicted_speedup.value_or(0), 1.25) << tag;
  }
}

TEST(llm_answer, takes_code_from_the_json_when_there_is_no_fence) {
  nlohmann::json j{
      {"strategy", "s"}, {"hypothesis", "h"}, {"predicted_speedup", 2}, {"code", kernel}};
  auto a = parse_answer(j.dump());
  EXPECT_EQ(a.code, kernel);
  EXPECT_DOUBLE_EQ(*a.predicted_speedup, 2.0);
  j["code"] = "```cuda\n" + kernel + "```";
  a = parse_answer("```json\n" + j.dump(2) + "\n```");
  EXPECT_EQ(a.code, kernel);
}

TEST(llm_answer, prefers_the_block_that_defines_kb_launch) {
  const auto a = parse_answer("```cuda\n__device__ float helper_with_a_long_name_here(float x);\n"
                              "// a long explanatory snippet that is not the file at all\n```\n"
                              "```cuda\n" +
                              kernel + "```\n```bash\nnvcc -O3 " + std::string(200, 'x') + "\n```");
  EXPECT_EQ(a.code, kernel);
}

TEST(llm_answer, reports_missing_fields_without_failing) {
  const auto a = parse_answer("```cuda\n" + kernel + "```");
  EXPECT_EQ(a.code, kernel);
  EXPECT_FALSE(a.has_json);
  EXPECT_EQ(a.missing, (std::vector<std::string>{"strategy", "hypothesis", "predicted_speedup"}));

  const auto b = parse_answer("```json\n{\"strategy\": \"s\", \"predicted_speedup\": -3}\n```");
  EXPECT_TRUE(b.code.empty());
  EXPECT_EQ(b.missing, (std::vector<std::string>{"code", "hypothesis", "predicted_speedup"}));
}

TEST(llm_answer, survives_garbage) {
  const std::vector<std::string> texts{"",
                                       "```",
                                       "{",
                                       "{\"strategy\": }",
                                       "```json\n{\"a\":\n",
                                       "~~~\n~~~",
                                       std::string(1, '\0'),
                                       "}}}{{{",
                                       "```cuda"};
  for (const auto& text : texts) {
    const auto a = parse_answer(text);
    EXPECT_FALSE(a.missing.empty()) << text;
  }
}

TEST(llm_answer, notices_an_unterminated_fence) {
  const auto a = parse_answer("```json\n{\"strategy\": \"s\"}\n```\n```cuda\n" + kernel +
                              "__global__ void k(");
  EXPECT_TRUE(a.code_unterminated);
  EXPECT_NE(a.code.find("kb_launch"), std::string::npos);
}

TEST(llm_answer, accepts_tilde_fences_and_indented_fences) {
  const auto a = parse_answer("~~~cuda\n" + kernel + "~~~\n");
  EXPECT_EQ(a.code, kernel);
  const auto b = parse_answer("  ```cuda\n" + kernel + "  ```\n");
  EXPECT_EQ(b.code, kernel);
}

} // namespace
} // namespace kb::llm
