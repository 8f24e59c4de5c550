// tollgate service: systemd's readiness protocol (sd_notify(3)) without libsystemd.
//
// Under a unit with Type=notify, systemd puts the path of a unix datagram socket in $NOTIFY_SOCKET
// ("/run/systemd/notify", or "@name" for an abstract one); the service sends "READY=1" there once it
// serves, and "STOPPING=1" when it begins to stop. Without $NOTIFY_SOCKET nothing is sent (a start
// by hand, or a unit with Type=simple).
//
// Thread safety: notify() may be called from any thread (one socket per call).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace tollgate::service {

// Sends `state` ("READY=1", "STOPPING=1", …) to the socket `notify_socket` names. nullopt or empty:
// nothing to do, ok. invalid_request: a malformed address, or the send failed (the system's reason).
Status notify(const std::optional<std::string>& notify_socket, std::string_view state);

}  // namespace tollgate::service
