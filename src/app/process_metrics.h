// tollgate app: the process's own figures for /metrics, read from /proc/self and named as the
// Prometheus client libraries name them (process_resident_memory_bytes, process_cpu_seconds_total,
// process_open_fds, process_max_fds, process_start_time_seconds), and tollgate_build_info.
//
// Linux only (/proc); elsewhere, or when /proc cannot be read, the process figures are left out.
// Thread safety: a pure function of /proc and the build; callable from any thread.
#pragma once

#include <string>

#include "http/metrics.h"

namespace tollgate::app {

// Adds the process metrics to `out`.
void render_process_metrics(http::Exposition& out);
// Adds tollgate_build_info{version="…",commit="…"} 1 (commit left out when unknown).
void render_build_info(http::Exposition& out);

}  // namespace tollgate::app
