#include "common/fs.hpp"
#include "llm/llm.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <sstream>

namespace kb::llm {

namespace {

constexpr std::string_view system_text =
    R"(You are a CUDA performance engineer working inside KernelBlaster. You write one complete CUDA source file, a candidate, that computes a task faster than the current best candidate. Each candidate is compiled with nvcc for the GPU named below, verified against a float64 oracle on several inputs and shapes, and timed against the task's baseline; only a verified, measured speedup counts.

Rules (the harness checks each one):
- Define `extern "C"` `int kb_launch(const kb_args* args)` as declared in <kblaster/candidate.h>; `kb_workspace_bytes` and `kb_candidate_info` are optional.
- Shapes, strides and dtypes arrive at run time: compile nothing about them in. Return non-zero for arguments you do not support.
- Enqueue all device work on `args->stream`: no other stream, no synchronisation of the device, no allocation (scratch memory only from `args->workspace`, sized by `kb_workspace_bytes`).
- Inputs are read-only. Write every element of every output on every call.
- Stay within the task's tolerances; when the task is deterministic, repeated runs must give bitwise identical results.
- The source is compiled with `-I include` of KernelBlaster, so <kblaster/candidate.h> and the family header are available, with KB_TASK_MATH defined as the task's math header (`#include KB_TASK_MATH`), and with KB_TASK_DTYPES, the mask of the task's dtypes (1 << kb_dtype): the headers' dtype dispatch compiles kernels for those dtypes only.

Answer with exactly two blocks and nothing else:
1. a ```json fence holding one object: {"strategy": "<family>.<short-name>", "hypothesis": "<why it is faster than the current best, one or two sentences>", "predicted_speedup": <number, your estimate of the speedup over the current best>, "params": {<the tunable parameters you chose>}}
2. a ```cuda fence holding the complete source file.)";

std::string clip_block(std::string_view text, size_t limit) {
  if (text.size() <= limit) {
    return std::string(text);
  }
  return fmt::format("{}\n... ({} more bytes)", text.substr(0, limit), text.size() - limit);
}

// A fenced block; the closing fence always starts a line.
std::string fenced(std::string_view tag, std::string_view text) {
  return fmt::format("```{}\n{}{}```\n", tag, text, text.ends_with('\n') ? "" : "\n");
}

std::string seconds_text(double s) {
  if (s <= 0) {
    return "unknown";
  }
  if (s < 1e-3) {
    return fmt::format("{:.4g} us", s * 1e6);
  }
  return fmt::format("{:.4g} ms", s * 1e3);
}

std::string shape_text(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

std::string dims_text(const task::shape_case& s) {
  std::string out;
  for (const auto& [name, value] : s.dims) {
    out += fmt::format("{}{}={}", out.empty() ? "" : " ", name, value);
  }
  return out;
}

const task::shape_case& shape_of(const task::contract& c, const std::string& name) {
  for (const auto& s : c.shapes) {
    if (s.name == name) {
      return s;
    }
  }
  return c.official();
}

void task_section(std::ostringstream& out, const search::proposal_context& context,
                  const prompt_material& material) {
  const task::contract& c = *context.task;
  const task::shape_case& shape = shape_of(c, context.shape);
  out << fmt::format("# Task {} ({}/{}): {}\n\n", c.id, c.suite, c.name, c.title);
  if (c.kind == task::task_kind::pytorch) {
    std::vector<std::string> args;
    for (const auto& a : c.module->init_args) {
      if (a.contains("dims")) {
        args.push_back(
            fmt::format("({})", fmt::join(a.at("dims").get<std::vector<std::string>>(), ", ")));
      } else {
        args.push_back(a.contains("dim") ? a.at("dim").get<std::string>() : a.at("value").dump());
      }
    }
    out << fmt::format("Reference: the PyTorch module `{}({})` of the source below, evaluated in "
                       "float64; its parameters and buffers follow the forward's inputs in "
                       "kb_args, in state_dict order (drawn over the range of PyTorch's own "
                       "initialisation), and its outputs are the kb_args outputs.\n",
                       c.module->class_name, fmt::join(args, ", "));
    for (const auto& d : c.degenerate) {
      out << fmt::format("Note: {}\n", d);
    }
  } else {
    out << fmt::format("Family: {}", task::to_string(c.fam));
    if (!c.reduce_dims.empty()) {
      const std::string rows =
          c.channel_rows ? "; one row per position of the other axes, a batch norm's channels, "
                           "with the weight and bias per row"
          : c.groups > 0
              ? fmt::format("; axis {} cut into {} groups of channels, one row per group, with the "
                            "weight and bias per channel (a group norm)",
                            c.reduce_dims.front(), c.groups)
              : std::string();
      out << fmt::format(" (reduced axes of x: {}{})", fmt::join(c.reduce_dims, ", "), rows);
    }
    out << fmt::format("\nPyTorch: `{}`\n", c.pytorch);
  }
  out << fmt::format("GPU: {}\n", context.gpu.empty() ? "unknown" : context.gpu);

  out << "\n## Tensors (in the order of kb_args)\n";
  for (const auto& t : c.inputs) {
    std::vector<std::string> distributions;
    for (const auto& d : t.distributions) {
      distributions.push_back(task::to_string(d));
    }
    out << fmt::format("- input {} (role {}): {} [{}], {}; values drawn from {}\n", t.name, t.role,
                       task::to_string(t.type), fmt::join(t.shape, ", "), t.layout,
                       distributions.empty() ? "the task's defaults"
                                             : fmt::format("{}", fmt::join(distributions, ", ")));
  }
  for (const auto& t : c.outputs) {
    out << fmt::format("- output {}: {} [{}], {}\n", t.name, task::to_string(t.type),
                       fmt::join(t.shape, ", "), t.layout);
  }
  for (const auto& p : c.params) {
    out << fmt::format("- scalar {} = {}\n", p.name, p.value);
  }

  out << "\n## Shapes\n";
  for (const auto& s : c.shapes) {
    out << fmt::format("- {} ({}): {}{}\n", s.name, s.role, dims_text(s),
                       &s == &shape ? "  <- timed" : "");
  }
  out << fmt::format("At the timed shape:");
  for (const auto& t : task::concrete_inputs(c, shape)) {
    out << fmt::format(" {} {}", t.name, shape_text(t.shape));
  }
  for (const auto& t : task::concrete_outputs(c, shape)) {
    out << fmt::format(" -> {} {}", t.name, shape_text(t.shape));
  }
  out << "\n";

  out << fmt::format(
      "\n## Correctness\nElementwise |y - ref| <= atol*scale + rtol*|ref| with "
      "atol {:g} (scale: RMS of the reference), rtol {:g}; relative L2 error <= {:g}; "
      "deterministic: {}. Checked on every shape above with several seeds and "
      "distributions; NaN or Inf where the reference has none fails.\n",
      c.tol.atol, c.tol.rtol, c.tol.rel_l2, c.tol.deterministic ? "yes" : "no");
  out << fmt::format("\n## Roofline\nMinimum bytes moved: {}; FLOPs: {}.\n", c.roof.bytes_expr,
                     c.roof.flops_expr.empty() ? "not given" : c.roof.flops_expr);

  if (c.kind == task::task_kind::pytorch) {
    out << fmt::format("\n## The PyTorch module ({})\n", c.module->source.filename().string())
        << fenced("python", material.module_source);
    out << fmt::format("\n## The contract ({})\n", c.file.filename().string())
        << fenced("toml", material.contract);
  } else {
    out << fmt::format("\n## Family contract (<{}>)\n", material.family_header)
        << fenced("", material.family_contract);
    out << fmt::format("\n## The task's math (KB_TASK_MATH, {})\n", c.math.filename().string())
        << fenced("cuda", material.math);
  }
  out << "\n## Candidate ABI (<kblaster/candidate.h>)\n" << fenced("c", material.abi_header);
}

void search_section(std::ostringstream& out, const search::proposal_context& context,
                    const prompt_limits& limits) {
  out << "\n# Where the search stands\n";
  out << fmt::format("Baseline: {}. Current best: {}", seconds_text(context.baseline_seconds),
                     seconds_text(context.best_seconds));
  if (context.baseline_seconds > 0 && context.best_seconds > 0) {
    out << fmt::format(" ({:.3f}x the baseline's speed)",
                       context.baseline_seconds / context.best_seconds);
  }
  out << fmt::format(". Roofline floor: {}.\n", seconds_text(context.floor_seconds));
  if (!context.best_source.empty()) {
    out << fmt::format("\n## Current best candidate (strategy {}, params {})\n",
                       context.best_strategy.empty() ? "baseline" : context.best_strategy,
                       context.best_params.is_null() ? "{}" : context.best_params.dump())
        << fenced("cuda", context.best_source);
  }
  if (!context.state.empty() || (!context.metrics.is_null() && !context.metrics.empty())) {
    out << fmt::format("\n## Bottleneck\n{}\n",
                       context.state.empty() ? "not profiled" : context.state);
    if (!context.metrics.is_null() && !context.metrics.empty()) {
      out << fenced("json", context.metrics.dump(2));
    }
  }
  if (!context.retrieved.empty()) {
    out << "\n## Strategies memory ranks highest for this task (best first, measured)\n";
    const size_t shown = std::min(limits.strategies, context.retrieved.size());
    for (size_t i = 0; i < shown; ++i) {
      const auto& s = context.retrieved[i];
      out << fmt::format("- {}: {}; {} attempts, {} correct and faster; best {:.3f}x, mean {:.3f}x "
                         "over the baseline",
                         s.strategy, s.description.empty() ? "no description" : s.description,
                         s.attempts, s.successes, s.best_speedup, s.mean_speedup);
      if (s.addresses_state) {
        out << "; addresses the current bottleneck state";
      }
      if (!s.last_failure.empty()) {
        out << fmt::format("; last failure {}", s.last_failure);
      }
      if (!s.params.is_null() && !s.params.empty()) {
        out << fmt::format("; best params {}", s.params.dump());
      }
      out << "\n";
    }
  }
  if (!context.recent_failures.empty()) {
    out << "\n## Recent failures (latest last)\n";
    const size_t count = context.recent_failures.size();
    const size_t first = count > limits.failures ? count - limits.failures : 0;
    for (size_t i = first; i < count; ++i) {
      const auto& f = context.recent_failures[i];
      out << fmt::format("- {} failed at {} ({})", f.strategy.empty() ? "a candidate" : f.strategy,
                         f.stage, f.reason);
      if (!f.params.is_null() && !f.params.empty()) {
        out << fmt::format(", params {}", f.params.dump());
      }
      if (!f.message.empty()) {
        out << ":\n" << fenced("text", clip_block(f.message, limits.failure_chars));
      } else {
        out << "\n";
      }
    }
  }
}

// The failed candidate as the assistant's own answer, in the format asked for.
std::string answer_text(const search::proposal& p) {
  const nlohmann::json meta{{"strategy", p.strategy},
                            {"hypothesis", p.hypothesis},
                            {"predicted_speedup", p.predicted_speedup},
                            {"params", p.params.is_null() ? nlohmann::json::object() : p.params}};
  return fenced("json", meta.dump(2)) + "\n" + fenced("cuda", p.source);
}

} // namespace

prompt_material load_prompt_material(const fs::path& project_root, const task::contract& task) {
  prompt_material m;
  m.abi_header = read_file(project_root / "include" / "kblaster" / "candidate.h");
  if (task.kind == task::task_kind::pytorch) {
    m.module_source = read_file(task.module->source);
    m.contract = read_file(task.file);
    return m;
  }
  m.family_header = fmt::format("kblaster/device/families/{}.cuh", task::to_string(task.fam));
  // The contract is the header's opening comment, up to its first line of code.
  std::istringstream header(read_file(project_root / "include" / m.family_header));
  std::string line;
  while (std::getline(header, line) && line.starts_with("//")) {
    m.family_contract += line + "\n";
  }
  m.math = read_file(task.math);
  return m;
}

std::vector<chat_message> build_prompt(const search::proposal_context& context,
                                       const prompt_material& material,
                                       const prompt_limits& limits) {
  std::ostringstream user;
  task_section(user, context, material);
  search_section(user, context, limits);
  user << "\n# Your turn\nPropose one candidate that is faster than the current best and passes "
          "verification. Answer in the two-block format: the ```json object, then the complete "
          "```cuda source.\n";
  return {{"system", std::string(system_text)}, {"user", user.str()}};
}

std::vector<chat_message> build_repair_prompt(const search::proposal_context& context,
                                              const prompt_material& material,
                                              const prompt_limits& limits,
                                              const search::proposal& failed,
                                              const std::string& error, int turn, int max_turns) {
  auto messages = build_prompt(context, material, limits);
  messages.push_back({"assistant", answer_text(failed)});
  messages.push_back(
      {"user",
       fmt::format("This candidate failed (repair turn {} of {}). The compiler or verifier "
                   "said:\n{}Fix the cause and answer again in the same format: the ```json "
                   "object, then the complete corrected ```cuda source.",
                   turn, max_turns, fenced("text", clip_block(error, limits.repair_chars)))});
  return messages;
}

} // namespace kb::llm
