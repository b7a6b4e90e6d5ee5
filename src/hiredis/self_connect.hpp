#pragma once
// A TCP connection to a port where nothing listens can land on itself. Linux picks a client's
// local port from the same range (ip_local_port_range) that a server's port may lie in; when a
// connect() to 127.0.0.1:P draws P as its own port, the SYN meets itself, the handshake completes
// ("simultaneous open"), and every byte written comes back as if the server had sent it. Redis
// commands are arrays of bulk strings, which parse as replies: a client that keeps reconnecting to
// a dead local master (a failover, a restart) would read its own commands as answers, an array of
// 6 for an FCALL of one decision. A few thousand reconnects to one even port are enough to draw it
// here (Linux gives connect() the ports of the range's parity), so the transports check every new
// TCP connection and treat one that reached itself as refused, as Go's net package does.
#include <string>

namespace redlimit::hiredis_detail {

// True when the connected socket `fd` is a TCP (IPv4 or IPv6) connection whose peer is its own
// address and port. False for any other socket, or when either address cannot be read.
bool connected_to_itself(int fd) noexcept;

// The ConnectionError's message for such a connection to `where` ("host:port"), the same from
// every transport.
std::string reached_itself(const std::string& where);

}  // namespace redlimit::hiredis_detail
