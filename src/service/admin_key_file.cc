#include "service/admin_key_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include "core/limits.h"

namespace tollgate::service {
namespace {


std::string reason(int error) {
  std::string why = std::strerror(error);
  if (!why.empty()) why[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(why[0])));
  return why;
}

std::string folder_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// fsync of the folder, so that the file's name (its creation or its removal) is durable too.
Status sync_folder(const std::string& path) {
  const std::string folder = folder_of(path);
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return invalid("admin_key_file: cannot open the folder " + folder + ": " + reason(errno));
  const int rc = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (rc != 0) return invalid("admin_key_file: cannot sync the folder " + folder + ": " + reason(error));
  return ok_status();
}

}  // namespace

Status write_admin_key_file(const std::string& path, std::string_view secret) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return Error::make(Code::conflict, "admin_key_file " + path + " exists already");
    return invalid("admin_key_file: cannot create " + path + ": " + reason(errno));
  }
  const std::string text = std::string(secret) + "\n";
  std::size_t written = 0;
  int error = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = n < 0 ? errno : EIO;
      break;
    }
    written += static_cast<std::size_t>(n);
  }
  // The mode is set again: a umask could only have narrowed 0600, but an inherited default ACL
  // could have widened it.
  if (error == 0 && ::fchmod(fd, 0600) != 0) error = errno;
  if (error == 0 && ::fsync(fd) != 0) error = errno;
  if (::close(fd) != 0 && error == 0) error = errno;
  if (error != 0) {
    ::unlink(path.c_str());
    return invalid("admin_key_file: cannot write " + path + ": " + reason(error));
  }
  return sync_folder(path);
}

Result<std::string> read_admin_key_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT) return Error::make(Code::not_found, "admin_key_file " + path + " does not exist");
    return invalid("admin_key_file: cannot read " + path + ": " + reason(errno));
  }
  std::string text;
  char buffer[1024];
  int error = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = errno;
      break;
    }
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > limits::kAdminKeyFileBytesMax) break;
  }
  ::close(fd);
  if (error != 0) return invalid("admin_key_file: cannot read " + path + ": " + reason(error));
  if (text.size() > limits::kAdminKeyFileBytesMax) {
    return invalid("admin_key_file " + path + " is larger than " + std::to_string(limits::kAdminKeyFileBytesMax) + " bytes: not a key file");
  }
  std::string key = text.substr(0, text.find('\n'));
  const bool printable = std::all_of(key.begin(), key.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u > 0x20 && u < 0x7f;
  });
  if (key.size() < limits::kAdminKeyLengthMin || !printable) {
    return invalid("admin_key_file " + path + " does not hold a key on its first line (at least " +
                   std::to_string(limits::kAdminKeyLengthMin) + " printable characters, no spaces)");
  }
  return key;
}

Status remove_admin_key_file(const std::string& path) {
  if (::unlink(path.c_str()) != 0) return invalid("admin_key_file: cannot remove " + path + ": " + reason(errno));
  return sync_folder(path);
}

}  // namespace tollgate::service
