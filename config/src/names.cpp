#include "covflow/config/config.hpp"
#include "schema_table.hpp"

namespace covflow::config {

std::string_view name(LogLevel value) { return detail::log_level_names.at(std::size_t(value)); }
std::string_view name(Backend value) { return detail::backend_names.at(std::size_t(value)); }
std::string_view name(IngestSource value) { return detail::ingest_source_names.at(std::size_t(value)); }
std::string_view name(Pace value) { return detail::pace_names.at(std::size_t(value)); }
std::string_view name(ZmqPattern value) { return detail::zmq_pattern_names.at(std::size_t(value)); }
std::string_view name(ScenarioPayload value) { return detail::scenario_payload_names.at(std::size_t(value)); }
std::string_view name(ArrayGeometry value) { return detail::array_geometry_names.at(std::size_t(value)); }
std::string_view name(ScenarioCovariance value) { return detail::scenario_covariance_names.at(std::size_t(value)); }
std::string_view name(SampleType value) { return detail::sample_type_names.at(std::size_t(value)); }
std::string_view name(Overflow value) { return detail::overflow_names.at(std::size_t(value)); }
std::string_view name(SourceCountRule value) { return detail::source_count_names.at(std::size_t(value)); }
std::string_view name(SubspaceMethod value) { return detail::subspace_method_names.at(std::size_t(value)); }
std::string_view name(CompressFormat value) { return detail::compress_format_names.at(std::size_t(value)); }

}  // namespace covflow::config
