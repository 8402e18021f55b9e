#include "covflow/config/endpoint.hpp"

#include <cstdio>

namespace covflow::config {

bool endpoint_is_local(const std::string& endpoint) {
  const auto scheme_end = endpoint.find("://");
  if (scheme_end == std::string::npos) return false;
  const std::string scheme = endpoint.substr(0, scheme_end);
  if (scheme == "inproc" || scheme == "ipc") return true;
  if (scheme != "tcp") return false;
  std::string host = endpoint.substr(scheme_end + 3);
  host = host.substr(0, host.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host == "localhost" || host == "::1") return true;
  // 127.0.0.0/8
  int a = -1, b = -1, c = -1, d = -1;
  char tail = 0;
  if (std::sscanf(host.c_str(), "%d.%d.%d.%d%c", &a, &b, &c, &d, &tail) == 4)
    return a == 127 && b >= 0 && b <= 255 && c >= 0 && c <= 255 && d >= 0 && d <= 255;
  return false;
}

}  // namespace covflow::config
