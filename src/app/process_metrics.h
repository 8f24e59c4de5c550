// tollgate app: the process's own figures for /metrics, read from /proc/self and named as the
// Prometheus client libraries name them (process_resident_memory_bytes, process_cpu_seconds_total,
// process_open_fds, process_max_fds, process_start_time_seconds), and tollgate_build_info.
//
// Linux only (/proc); elsewhere, or when /proc cannot be read, the process figures are left out.
// Thread safety: a pure function of /proc and the build; callable from any thread.
#pragma once

#include <string>

namespace tollgate::app {

// Appends the process metrics (Prometheus text format 0.0.4) to `out`.
void render_process_metrics(std::string& out);
// Appends tollgate_build_info{version="…",commit="…"} 1 (commit left out when unknown).
void render_build_info(std::string& out);

}  // namespace tollgate::app
