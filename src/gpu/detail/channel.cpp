#include "gpu/detail/channel.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

namespace kb::gpu::detail {

namespace {

constexpr size_t max_fds = 8;

struct header {
  uint32_t magic;
  uint32_t type;
  uint32_t length;
};

bool write_all(int sock, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(sock, data, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) {
      continue;
    }
    if (w <= 0) {
      return false;
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool read_all(int sock, char* data, size_t n) {
  while (n > 0) {
    const ssize_t r = ::recv(sock, data, n, 0);
    if (r < 0 && errno == EINTR) {
      continue;
    }
    if (r <= 0) {
      return false;
    }
    data += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

} // namespace

bool readable(int sock, int timeout_ms, int spin_us) {
  pollfd p{sock, POLLIN, 0};
  if (spin_us > 0) {
    const auto start = std::chrono::steady_clock::now();
    auto until = start + std::chrono::microseconds(spin_us);
    if (timeout_ms >= 0) {
      until = std::min(until, start + std::chrono::milliseconds(timeout_ms));
    }
    while (true) {
      const int r = ::poll(&p, 1, 0);
      if (r > 0) {
        return true;
      }
      if (r < 0 && errno != EINTR) {
        return false;
      }
      const auto now = std::chrono::steady_clock::now();
      if (now >= until) {
        if (timeout_ms >= 0) {
          const auto spent =
              std::chrono::duration_cast<std::chrono::milliseconds>(now - start).count();
          if (spent >= timeout_ms) {
            return false;
          }
          timeout_ms -= static_cast<int>(spent);
        }
        break;
      }
      ::sched_yield();
    }
  }
  while (true) {
    const int r = ::poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR) {
      continue;
    }
    return r > 0;
  }
}

bool send_frame(int sock, uint32_t type, const std::string& payload, const std::vector<int>& fds) {
  if (payload.size() > max_payload || fds.size() > max_fds) {
    return false;
  }
  const header h{frame_magic, type, static_cast<uint32_t>(payload.size())};
  msghdr m{};
  iovec io{const_cast<header*>(&h), sizeof h};
  m.msg_iov = &io;
  m.msg_iovlen = 1;
  alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(int) * max_fds)> control{};
  if (!fds.empty()) {
    m.msg_control = control.data();
    m.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  ssize_t w = 0;
  do {
    w = ::sendmsg(sock, &m, MSG_NOSIGNAL);
  } while (w < 0 && errno == EINTR);
  if (w <= 0) {
    return false;
  }
  // The rest of the header (a partial first write) and the payload.
  const auto* bytes = reinterpret_cast<const char*>(&h);
  if (static_cast<size_t>(w) < sizeof h &&
      !write_all(sock, bytes + w, sizeof h - static_cast<size_t>(w))) {
    return false;
  }
  return write_all(sock, payload.data(), payload.size());
}

recv_status receive_frame(int sock, frame& out, int timeout_ms, int spin_us) {
  out = frame{};
  if ((timeout_ms >= 0 || spin_us > 0) && !readable(sock, timeout_ms, spin_us)) {
    return recv_status::timeout;
  }
  header h{};
  msghdr m{};
  iovec io{&h, sizeof h};
  m.msg_iov = &io;
  m.msg_iovlen = 1;
  alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(int) * max_fds)> control{};
  m.msg_control = control.data();
  m.msg_controllen = control.size();
  ssize_t r = 0;
  do {
    r = ::recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
  } while (r < 0 && errno == EINTR);
  if (r <= 0) {
    return recv_status::closed;
  }
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < n; ++i) {
        int fd = -1;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        out.fds.push_back(fd);
      }
    }
  }
  const auto close_fds = [&out] {
    for (int fd : out.fds) {
      ::close(fd);
    }
    out.fds.clear();
  };
  if (static_cast<size_t>(r) < sizeof h &&
      !read_all(sock, reinterpret_cast<char*>(&h) + r, sizeof h - static_cast<size_t>(r))) {
    close_fds();
    return recv_status::closed;
  }
  if (h.magic != frame_magic || h.length > max_payload) {
    close_fds();
    return recv_status::malformed;
  }
  out.type = h.type;
  out.payload.resize(h.length);
  if (!read_all(sock, out.payload.data(), h.length)) {
    close_fds();
    return recv_status::closed;
  }
  return recv_status::ok;
}

} // namespace kb::gpu::detail
