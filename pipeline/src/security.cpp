#include "covflow/pipeline/security.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "covflow/pipeline/logging.hpp"

namespace covflow::pipeline {
namespace {

constexpr std::size_t kZ85KeyChars = 40;

bool is_z85_key(const std::string& text) {
  if (text.size() != kZ85KeyChars) return false;
  std::array<std::uint8_t, 32> binary{};
  return zmq_z85_decode(binary.data(), text.c_str()) != nullptr;
}

std::string trim(const std::string& line) {
  const auto first = line.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return {};
  return line.substr(first, line.find_last_not_of(" \t\r\n") - first + 1);
}

std::vector<std::string> key_lines(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot read the key file: {}", file.string(), std::strerror(errno)));
  std::vector<std::string> keys;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const std::string key = trim(line);
    if (key.empty() || key.front() == '#') continue;
    if (!is_z85_key(key))
      throw std::runtime_error(fmt::format("{}:{}: not a CURVE key (40 characters of Z85, as `covflow keygen` writes)",
                                           file.string(), number));
    keys.push_back(key);
  }
  return keys;
}

}  // namespace

CurveKeys generate_curve_keys() {
  std::array<char, 41> public_key{}, secret_key{};
  if (zmq_curve_keypair(public_key.data(), secret_key.data()) != 0)
    throw std::runtime_error(fmt::format("cannot make a CURVE key pair: {} (libzmq without libsodium?)", zmq_strerror(zmq_errno())));
  return {public_key.data(), secret_key.data()};
}

std::string read_curve_key(const std::filesystem::path& file) {
  const auto keys = key_lines(file);
  if (keys.empty()) throw std::runtime_error(fmt::format("{}: no key in the file", file.string()));
  return keys.front();
}

CurveKeys read_curve_secret(const std::filesystem::path& file) {
  CurveKeys keys;
  keys.secret_key = read_curve_key(file);
  std::array<char, 41> public_key{};
  if (zmq_curve_public(public_key.data(), keys.secret_key.c_str()) != 0)
    throw std::runtime_error(fmt::format("{}: cannot derive the public key: {}", file.string(), zmq_strerror(zmq_errno())));
  keys.public_key = public_key.data();
  return keys;
}

std::vector<std::string> read_curve_key_list(const std::filesystem::path& file) { return key_lines(file); }

void write_curve_keys(const std::filesystem::path& name, const CurveKeys& keys) {
  const auto write = [](const std::filesystem::path& path, const std::string& text, mode_t mode) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0)
      throw std::runtime_error(fmt::format("{}: cannot create: {}{}", path.string(), std::strerror(errno),
                                           errno == EEXIST ? " (refusing to overwrite it)" : ""));
    const bool ok = ::write(fd, text.data(), text.size()) == ssize_t(text.size());
    ::close(fd);
    if (!ok) throw std::runtime_error(fmt::format("{}: cannot write", path.string()));
  };
  std::filesystem::path secret = name, public_file = name;
  secret += ".secret";
  public_file += ".public";
  write(secret, "# CURVE secret key (covflow keygen): keep it to its owner\n" + keys.secret_key + "\n", 0600);
  write(public_file, "# CURVE public key (covflow keygen)\n" + keys.public_key + "\n", 0644);
}

// ZeroMQ's authentication protocol (ZAP, RFC 27): libzmq asks a REP socket bound at
// inproc://zeromq.zap.01 in the same context about every CURVE handshake; the reply admits (200)
// or refuses (400) the client's public key.
struct ZapHandler::State {
  zmq::socket_t socket;
  std::set<std::string> allowed;  // the clients' public keys, 32 bytes each
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> refused{0};
  std::thread thread;

  State(zmq::context_t& context, const std::vector<std::string>& clients) : socket(context, zmq::socket_type::rep) {
    for (const auto& key : clients) {
      std::array<std::uint8_t, 32> binary{};
      zmq_z85_decode(binary.data(), key.c_str());
      allowed.emplace(reinterpret_cast<const char*>(binary.data()), binary.size());
    }
    socket.set(zmq::sockopt::linger, 0);
    socket.bind("inproc://zeromq.zap.01");
    thread = std::thread([this] { serve(); });
  }

  void serve() {
    while (!stop.load()) {
      zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
      try {
        if (zmq::poll(&item, 1, std::chrono::milliseconds(100)) == 0) continue;
        std::vector<zmq::message_t> request;
        zmq::message_t part;
        do {
          if (!socket.recv(part, zmq::recv_flags::none)) break;
          request.emplace_back(std::move(part));
          part = zmq::message_t();
        } while (request.back().more());
        // version, request id, domain, address, routing id, mechanism, credentials...
        const bool admitted = request.size() >= 7 && request[5].to_string_view() == "CURVE" &&
                              (allowed.empty() || allowed.contains(std::string(request[6].to_string_view())));
        if (!admitted) {
          ++refused;
          logger("pipeline")->warn("refused a {} client at {}: its key is not among the authorised ones",
                                   request.size() >= 6 ? std::string(request[5].to_string_view()) : std::string("?"),
                                   request.size() >= 4 ? std::string(request[3].to_string_view()) : std::string("?"));
        }
        const std::string id = request.size() >= 2 ? std::string(request[1].to_string_view()) : std::string();
        socket.send(zmq::str_buffer("1.0"), zmq::send_flags::sndmore);
        socket.send(zmq::buffer(id), zmq::send_flags::sndmore);
        socket.send(zmq::buffer(std::string(admitted ? "200" : "400")), zmq::send_flags::sndmore);
        socket.send(zmq::buffer(std::string(admitted ? "OK" : "not an authorised client key")), zmq::send_flags::sndmore);
        socket.send(zmq::str_buffer(""), zmq::send_flags::sndmore);  // user id
        socket.send(zmq::str_buffer(""), zmq::send_flags::none);     // metadata
      } catch (const zmq::error_t& e) {
        if (e.num() == ETERM) return;
        logger("pipeline")->error("ZAP handler: {}", e.what());
      }
    }
  }
};

ZapHandler::ZapHandler(zmq::context_t& context, std::vector<std::string> authorized_clients)
    : state_(std::make_unique<State>(context, authorized_clients)) {}

ZapHandler::~ZapHandler() {
  state_->stop = true;
  if (state_->thread.joinable()) state_->thread.join();
}

std::uint64_t ZapHandler::refused() const { return state_->refused.load(); }

std::unique_ptr<ZapHandler> secure_server(zmq::context_t& context, zmq::socket_t& socket, const EndpointSecurity& security) {
  if (!security.curve()) return nullptr;
  // The handler answers every CURVE handshake: with no client list it admits any client that
  // completed the handshake (it holds the server's public key).
  auto handler = std::make_unique<ZapHandler>(context, security.authorized_clients);
  socket.set(zmq::sockopt::zap_domain, "covflow");
  socket.set(zmq::sockopt::curve_server, true);
  socket.set(zmq::sockopt::curve_secretkey, security.server_secret_key);
  return handler;
}

void restrict_ipc_endpoint(const std::string& bound_endpoint) {
  constexpr std::string_view scheme = "ipc://";
  if (!bound_endpoint.starts_with(scheme)) return;
  const std::string path = bound_endpoint.substr(scheme.size());
  if (path.empty() || path.front() == '@') return;  // an abstract socket has no file
  if (::chmod(path.c_str(), 0600) != 0)
    logger("pipeline")->warn("{}: cannot restrict the socket file to its owner: {}", bound_endpoint, std::strerror(errno));
}

void secure_client(zmq::socket_t& socket, const std::string& server_public_key, const CurveKeys& client) {
  socket.set(zmq::sockopt::curve_serverkey, server_public_key);
  socket.set(zmq::sockopt::curve_publickey, client.public_key);
  socket.set(zmq::sockopt::curve_secretkey, client.secret_key);
}

}  // namespace covflow::pipeline
