#include "service/sd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

namespace tollgate::service {

Status notify(const std::optional<std::string>& notify_socket, std::string_view state) {
  if (!notify_socket || notify_socket->empty()) return ok_status();
  const std::string& address = *notify_socket;
  sockaddr_un to{};
  to.sun_family = AF_UNIX;
  if ((address[0] != '/' && address[0] != '@') || address.size() > sizeof to.sun_path) {
    return invalid("NOTIFY_SOCKET must be an absolute path or @abstract name of at most " +
                   std::to_string(sizeof to.sun_path) + " bytes");
  }
  std::memcpy(to.sun_path, address.data(), address.size());
  if (address[0] == '@') to.sun_path[0] = '\0';  // an abstract socket: its name starts with a NUL
  // A path's address length counts its terminating NUL; an abstract name's does not.
  const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address.size() + (address[0] == '/' ? 1 : 0));
  if (address[0] == '/' && address.size() == sizeof to.sun_path) {
    return invalid("NOTIFY_SOCKET path is too long");
  }
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return invalid(std::string("sd_notify: socket: ") + std::strerror(errno));
  ssize_t sent = -1;
  do {
    sent = ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL, reinterpret_cast<const sockaddr*>(&to), length);
  } while (sent < 0 && errno == EINTR);
  const int error = errno;
  ::close(fd);
  if (sent < 0) return invalid("sd_notify: send to " + address + ": " + std::strerror(error));
  return ok_status();
}

}  // namespace tollgate::service
