// Who may talk to covflowd's sockets. Endpoints on loopback, inproc and ipc are local; an ipc
// socket file is made readable and writable by its owner alone. An endpoint off loopback is
// reachable from the network, so the configuration may bind one only with ZeroMQ's CURVE security
// (the daemon holds a secret key; a client must know the daemon's public key, and, when a list of
// client keys is given, present one of them) or with an explicit choice to trust the network
// (daemon.allow_unauthenticated). docs/zmq.md, "Security".
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <zmq.hpp>

namespace covflow::pipeline {

// A CURVE key pair as ZeroMQ spells keys: Z85 text of 40 characters each.
struct CurveKeys {
  std::string public_key, secret_key;
};

// A new key pair (zmq_curve_keypair). Throws std::runtime_error when libzmq has no CURVE.
CurveKeys generate_curve_keys();
// The key in a key file: its first line that is not empty or a # comment, trimmed, which must be a
// 40-character Z85 key. A secret key file yields the pair (the public key derived from it).
// Throws std::runtime_error naming the file and what is wrong.
std::string read_curve_key(const std::filesystem::path& file);
CurveKeys read_curve_secret(const std::filesystem::path& file);
// Every key of a file of client public keys, one per line (# comments and blank lines skipped).
std::vector<std::string> read_curve_key_list(const std::filesystem::path& file);
// Writes `keys` as NAME.secret (mode 0600) and NAME.public; throws std::runtime_error, refusing to
// overwrite either.
void write_curve_keys(const std::filesystem::path& name, const CurveKeys& keys);

// How the daemon's sockets are secured: a server secret key (empty: no CURVE) and the client
// public keys allowed (empty: any client that holds the server's public key).
struct EndpointSecurity {
  std::string server_secret_key;
  std::vector<std::string> authorized_clients;
  bool curve() const { return !server_secret_key.empty(); }
};

// Makes `socket` a CURVE server with `security`'s key, and, for a list of clients, starts a ZAP
// handler on `context` that admits those keys alone; the returned object owns that handler (keep
// it as long as the socket). Nothing (null) without CURVE.
class ZapHandler;
std::unique_ptr<ZapHandler> secure_server(zmq::context_t& context, zmq::socket_t& socket, const EndpointSecurity& security);
// After bind: an ipc endpoint's socket file becomes readable and writable by its owner only.
void restrict_ipc_endpoint(const std::string& bound_endpoint);
// Makes `socket` a CURVE client of a server whose public key is `server_public_key`, with `client`'s keys.
void secure_client(zmq::socket_t& socket, const std::string& server_public_key, const CurveKeys& client);

class ZapHandler {
 public:
  ZapHandler(zmq::context_t& context, std::vector<std::string> authorized_clients);
  ~ZapHandler();
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;
  std::uint64_t refused() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace covflow::pipeline
