#include "gpu/check_rule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace kb::gpu {

check_outcome judge(const std::vector<error_metrics>& metrics, const std::vector<double>& scales,
                    const std::vector<std::string>& names, double rel_l2_limit) {
  check_outcome o;
  for (size_t i = 0; i < metrics.size(); ++i) {
    const auto& m = metrics[i];
    const double rel_l2 = m.sum_sq_ref > 0 ? std::sqrt(m.sum_sq_err / m.sum_sq_ref)
                                           : (m.sum_sq_err > 0 ? INFINITY : 0.0);
    // p99 of |err| from the histogram of |err| / scale (the upper edge of the bin that holds it).
    const uint64_t finite = m.count - std::min(m.count, m.unwritten + m.nonfinite);
    uint64_t above = 0;
    double p99 = 0;
    for (int k = 0; k < error_histogram_bins && finite > 0; ++k) {
      above += m.histogram[k];
      if (above * 100 >= finite) {
        p99 = std::ldexp(1.0, -k) * scales[i];
        break;
      }
    }
    o.outputs.push_back({{"output", names[i]},
                         {"count", m.count},
                         {"scale", scales[i]},
                         {"max_abs_err", m.max_abs_err},
                         {"max_rel_err", m.max_rel_err},
                         {"p99_abs_err", p99},
                         {"rel_l2", std::isfinite(rel_l2) ? rel_l2 : -1.0},
                         {"max_excess", std::isfinite(m.max_excess) ? m.max_excess : -1.0},
                         {"violations", m.violations},
                         {"nonfinite", m.nonfinite},
                         {"unwritten", m.unwritten},
                         {"worst_index", m.worst_index}});
    if (!o.passed) {
      continue;
    }
    if (m.unwritten > 0) {
      o.passed = false;
      o.reason = "verify.unwritten";
      o.message =
          fmt::format("{} of {} elements of '{}' never written", m.unwritten, m.count, names[i]);
    } else if (m.nonfinite > 0) {
      o.passed = false;
      o.reason = "verify.nonfinite";
      o.message = fmt::format("{} NaN/Inf values in '{}' where the reference differs", m.nonfinite,
                              names[i]);
    } else if (m.violations > 0) {
      o.passed = false;
      o.reason = "verify.mismatch";
      o.message =
          fmt::format("{} of {} elements of '{}' outside atol*scale + rtol*|ref| (worst at index "
                      "{}: {:.3g}x the bound; max abs err {:.3g})",
                      m.violations, m.count, names[i], m.worst_index, m.max_excess, m.max_abs_err);
    } else if (!(rel_l2 <= rel_l2_limit)) {
      o.passed = false;
      o.reason = "verify.rel_l2";
      o.message = fmt::format("relative L2 error {:.3g} of '{}' above {:.3g}", rel_l2, names[i],
                              rel_l2_limit);
    }
  }
  return o;
}

} // namespace kb::gpu
