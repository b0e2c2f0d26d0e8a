// The environment of a process that runs a task's PyTorch module (pytorch_oracle.py probe and
// describe; the judge, which embeds the oracle): worker_environment() (common/process.hpp) and
// the interpreter's and the device's settings, nothing else of this process's environment, so
// that the model's API key or any other credential it holds never reaches the module.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace kb {

const std::vector<std::string>& module_environment_names();
std::map<std::string, std::string> module_environment();

} // namespace kb
