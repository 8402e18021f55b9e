# Small helpers shared by the module CMakeLists.

# Warnings for host code; nvcc forwards them to the host compiler.
function(covflow_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-unused-parameter>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall --expt-relaxed-constexpr>)
endfunction()

# covflow_module(NAME name SOURCES ... DEPS ...): a static library covflow_<name> with the alias
# covflow::<name>, public headers under <name>/include.
function(covflow_module)
  cmake_parse_arguments(M "" "NAME" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(covflow_${M_NAME} STATIC ${M_SOURCES})
  add_library(covflow::${M_NAME} ALIAS covflow_${M_NAME})
  set_target_properties(covflow_${M_NAME} PROPERTIES EXPORT_NAME ${M_NAME} OUTPUT_NAME covflow_${M_NAME})
  target_include_directories(covflow_${M_NAME} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_features(covflow_${M_NAME} PUBLIC cxx_std_20)
  target_link_libraries(covflow_${M_NAME} PUBLIC ${M_PUBLIC_DEPS} PRIVATE ${M_PRIVATE_DEPS})
  covflow_warnings(covflow_${M_NAME})
endfunction()

function(covflow_executable target)
  covflow_warnings(${target})
endfunction()
