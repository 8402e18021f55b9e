// `covflow report` (report_cli.hpp): the interpreter and the package are found, the resolved
// configuration goes to a temporary file, and python3 -m covflow_report does the rest.
#include "common/report_cli.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <string_view>
#include <system_error>
#include <vector>

#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/exit_codes.hpp"

extern char** environ;

namespace covflow::cli {
namespace {

// A temporary file holding the resolved configuration, removed when the report is done.
class TemporaryConfig {
 public:
  explicit TemporaryConfig(const std::string& text) {
    std::string pattern = (std::filesystem::temp_directory_path() / "covflow-report-XXXXXX.yaml").string();
    const int fd = mkstemps(pattern.data(), 5);
    if (fd < 0) throw std::system_error(errno, std::generic_category(), "covflow report: temporary file in " + pattern);
    path_ = pattern;
    std::string_view rest = text;
    while (!rest.empty()) {
      const ssize_t n = ::write(fd, rest.data(), rest.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        const int error = errno;
        ::close(fd);
        throw std::system_error(error, std::generic_category(), "covflow report: writing " + path_);
      }
      rest.remove_prefix(std::size_t(n));
    }
    ::close(fd);
  }
  ~TemporaryConfig() { ::unlink(path_.c_str()); }
  TemporaryConfig(const TemporaryConfig&) = delete;
  TemporaryConfig& operator=(const TemporaryConfig&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// This process's environment with the package's directory first on PYTHONPATH.
std::vector<std::string> environment_with(const std::filesystem::path& package_dir) {
  std::vector<std::string> out;
  std::string python_path = package_dir.string();
  for (char** entry = environ; *entry; ++entry) {
    const std::string_view variable = *entry;
    if (variable.starts_with("PYTHONPATH=")) {
      if (variable.size() > 11) python_path.append(":").append(variable.substr(11));
    } else {
      out.emplace_back(variable);
    }
  }
  out.push_back("PYTHONPATH=" + python_path);
  return out;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

std::filesystem::path report_package_dir() {
  std::error_code error;
  const std::filesystem::path executable = std::filesystem::read_symlink("/proc/self/exe", error);
  const std::filesystem::path base = error ? std::filesystem::current_path() : executable.parent_path();
  return (base / COVFLOW_REPORT_PACKAGE_RELDIR).lexically_normal();
}

int run_report(const ReportRequest& request, std::ostream& err) {
  const std::string python = COVFLOW_REPORT_PYTHON;
  if (::access(python.c_str(), X_OK) != 0) {
    err << fmt::format("covflow report: error: {} not found: install Debian's python3-matplotlib (it brings python3 "
                       "and python3-numpy; scripts/setup lists it), or rebuild covflow with -DCOVFLOW_REPORT_PYTHON=PATH\n",
                       python);
    return exit_code::missing_package;
  }
  const std::filesystem::path package_dir = report_package_dir();
  if (!std::filesystem::exists(package_dir / "covflow_report" / "__main__.py")) {
    err << fmt::format("covflow report: error: the Python package covflow_report is not in {} (it is installed there "
                       "with covflow: cmake --install; in a build tree, build the covflow target)\n",
                       package_dir.string());
    return exit_code::missing_package;
  }

  std::optional<TemporaryConfig> config;
  std::vector<std::string> arguments{python, "-m", "covflow_report", request.results, "--out", request.out};
  if (request.config_yaml) {
    config.emplace(*request.config_yaml);
    arguments.insert(arguments.end(), {"--config", config->path(), "--config-label", request.config_label});
  }
  if (!request.frames.empty()) arguments.insert(arguments.end(), {"--frames", request.frames});
  if (request.frame) arguments.insert(arguments.end(), {"--frame", std::to_string(*request.frame)});

  std::vector<std::string> environment = environment_with(package_dir);
  std::vector<char*> argv = pointers(arguments), envp = pointers(environment);
  pid_t child = 0;
  if (const int error = posix_spawn(&child, python.c_str(), nullptr, nullptr, argv.data(), envp.data()); error != 0) {
    err << fmt::format("covflow report: error: cannot run {}: {}\n", python, std::strerror(error));
    return exit_code::missing_package;
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) {
      err << fmt::format("covflow report: error: waiting for {}: {}\n", python, std::strerror(errno));
      return exit_code::internal_error;
    }
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  err << fmt::format("covflow report: error: {} -m covflow_report ended by signal {}\n", python, WTERMSIG(status));
  return exit_code::internal_error;
}

}  // namespace covflow::cli
