// Framed messages between the judge and a runner over a Unix stream socket: a fixed header
// (magic, type, payload length) and a JSON payload, with file descriptors (SCM_RIGHTS) attached
// to the first byte. Typed messages and their one JSON mapping are in messages.hpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kb::gpu::detail {

inline constexpr uint32_t frame_magic = 0x4B42524Eu; // "KBRN"
inline constexpr uint32_t max_payload = 1u << 20;    // [bytes]

struct frame {
  uint32_t type = 0;
  std::string payload;
  std::vector<int> fds; // received descriptors; the receiver owns them
};

enum class recv_status { ok, closed, timeout, malformed };

// Sends one frame; false when the peer is gone.
bool send_frame(int sock, uint32_t type, const std::string& payload,
                const std::vector<int>& fds = {});

// Receives one frame, waiting at most `timeout_ms` for its first byte (-1: forever). A frame
// whose header is wrong or whose payload is too long is `malformed`. See `readable` for `spin_us`.
recv_status receive_frame(int sock, frame& out, int timeout_ms, int spin_us = 0);

// Whether a frame's first byte is ready within `timeout_ms` (-1: forever). For its first
// `spin_us` microseconds the wait polls without sleeping (yielding the processor between polls),
// then it sleeps in poll(2): a process woken from sleep answers tens to hundreds of microseconds
// late, and the judge's round trip of a call must measure the call, not the scheduler.
bool readable(int sock, int timeout_ms, int spin_us = 0);

// How long the judge and its runners spin for the next message [us]: longer than the gap between
// two calls of one runner in a timing session, so that neither side sleeps while it is timed.
inline constexpr int message_spin_us = 20'000;

} // namespace kb::gpu::detail
