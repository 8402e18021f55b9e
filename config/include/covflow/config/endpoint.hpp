// What a ZeroMQ endpoint in the configuration reaches.
#pragma once

#include <string>

namespace covflow::config {

// Whether an endpoint is reachable only from this host: inproc, ipc, or tcp on a loopback
// address (127.0.0.0/8, ::1, localhost). A wildcard (tcp://*:5600, 0.0.0.0) or any other address
// is reachable from the network.
bool endpoint_is_local(const std::string& endpoint);

}  // namespace covflow::config
