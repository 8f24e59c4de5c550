#include "app/process_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>
#include <vector>

#include "core/parse.h"
#include "core/version.h"
#include "http/metrics.h"

namespace tollgate::app {
namespace {

// The fields of /proc/self/stat after the command name (which may hold spaces and parentheses):
// fields[0] is field 3 (state) of proc(5).
std::optional<std::vector<std::string>> stat_fields() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  const auto close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(line.substr(close + 1));
  std::vector<std::string> fields;
  for (std::string f; rest >> f;) fields.push_back(std::move(f));
  if (fields.size() < 22) return std::nullopt;
  return fields;
}

// The boot time (seconds since the epoch) as the wall clock sees it now: now − /proc/uptime.
// (/proc/stat's btime is whole seconds and drifts from the wall clock on a VM that was paused or
// whose clock was stepped; anchoring at now keeps the start time within the process's own life.)
std::optional<double> boot_time_s() {
  std::ifstream in("/proc/uptime");
  double uptime_s = 0;
  if (!(in >> uptime_s)) return std::nullopt;
  const double now_s =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return now_s - uptime_s;
}

// Field `number` of proc(5)'s /proc/self/stat (numbered from 1, as proc(5) does), if it is a count.
std::optional<double> stat_field(const std::vector<std::string>& fields, std::size_t number) {
  const auto n = parse_uint(fields[number - 3]);  // fields[0] is field 3
  if (!n) return std::nullopt;
  return static_cast<double>(*n);
}

std::optional<double> open_fds() {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return std::nullopt;
  double n = 0;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') n += 1;
  }
  closedir(dir);
  return n - 1;  // not the descriptor reading the directory
}

constexpr metrics::Family kCpu{"process_cpu_seconds_total", metrics::Type::counter,
                               "Total user and system CPU time spent in seconds."};
constexpr metrics::Family kResident{"process_resident_memory_bytes", metrics::Type::gauge,
                                    "Resident memory size in bytes."};
constexpr metrics::Family kStart{"process_start_time_seconds", metrics::Type::gauge,
                                 "Start time of the process since unix epoch in seconds."};
constexpr metrics::Family kOpenFds{"process_open_fds", metrics::Type::gauge, "Number of open file descriptors."};
constexpr metrics::Family kMaxFds{"process_max_fds", metrics::Type::gauge, "Maximum number of open file descriptors."};
constexpr metrics::Family kBuildInfo{"tollgate_build_info", metrics::Type::gauge,
                                     "The version (and commit) this binary was built from."};

}  // namespace

void render_process_metrics(http::Exposition& out) {
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page_bytes = static_cast<double>(sysconf(_SC_PAGESIZE));
  if (auto f = stat_fields(); f && ticks > 0 && page_bytes > 0) {
    // proc(5): utime (14), stime (15), starttime (22), rss (24). A field that is not a count (a
    // kernel we do not know) leaves its gauge out; it never throws.
    const auto utime = stat_field(*f, 14);
    const auto stime = stat_field(*f, 15);
    if (utime && stime) {
      out.sample(kCpu, "", (*utime + *stime) / ticks);
    }
    if (const auto rss = stat_field(*f, 24)) {
      out.sample(kResident, "", *rss * page_bytes);
    }
    const auto start = stat_field(*f, 22);
    if (auto boot = boot_time_s(); boot && start) {
      out.sample(kStart, "", *boot + *start / ticks);
    }
  }
  if (auto fds = open_fds()) out.sample(kOpenFds, "", *fds);
  if (rlimit limit{}; getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    out.sample(kMaxFds, "", static_cast<double>(limit.rlim_cur));
  }
}

void render_build_info(http::Exposition& out) {
  std::string labels = "version=\"" + std::string(kVersion) + "\"";
  if (std::string_view(kCommit).size() > 0) labels += ",commit=\"" + std::string(kCommit) + "\"";
  out.sample(kBuildInfo, labels, 1);
}

}  // namespace tollgate::app
