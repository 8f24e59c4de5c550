// tollgate app: `tollgate serve` — wires configuration, store, ledger, keys and the HTTP server.
#pragma once

#include <cstdint>
#include <functional>

#include "config/config.h"

namespace tollgate::app {

// Runs the server until SIGTERM/SIGINT; returns the process exit code (0 after a graceful stop).
// `on_listening` (if set) is told the bound port once the server accepts connections.
int serve(const ServerConfig& config, const std::function<void(std::uint16_t)>& on_listening = {});

}  // namespace tollgate::app
