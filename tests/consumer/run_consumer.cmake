# ctest driver: install covflow into a scratch prefix, then configure, build and run a separate
# project that finds it with find_package(covflow).
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR GENERATOR CXX_COMPILER LINK_FLAGS)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_consumer.cmake: ${var} not set")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "step failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  message("${out}")
endfunction()
step(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix")
# What the installation gives systemd and the reader: the unit (pointing at this prefix), the
# sysusers entry, the documentation the unit names.
set(prefix "${WORK_DIR}/prefix")
foreach(installed lib/systemd/system/covflowd.service lib/sysusers.d/covflow.conf share/doc/covflow/daemon.md
                  share/doc/covflow/config.md bin/covflowd bin/covflow lib/systemd/system/covflowd@.service
                  lib/systemd/system/covflow-collect.service lib/systemd/system/covflow-feed@.service share/doc/covflow/scale.md)
  if(NOT EXISTS "${prefix}/${installed}")
    message(FATAL_ERROR "cmake --install did not install ${installed}")
  endif()
endforeach()
file(READ "${prefix}/lib/systemd/system/covflowd.service" unit)
if(NOT unit MATCHES "ExecStart=${prefix}/bin/covflowd --config" OR NOT unit MATCHES "Type=notify")
  message(FATAL_ERROR "the installed unit does not start ${prefix}/bin/covflowd as a notify service:\n${unit}")
endif()
file(READ "${prefix}/lib/systemd/system/covflow-collect.service" unit)
if(NOT unit MATCHES "ExecStart=${prefix}/bin/covflow collect ")
  message(FATAL_ERROR "the installed collector unit does not start ${prefix}/bin/covflow collect:\n${unit}")
endif()
step(${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${WORK_DIR}/build" -G "${GENERATOR}"
     "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix" "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}"
     "-DCMAKE_EXE_LINKER_FLAGS=${LINK_FLAGS}")
step(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
step("${WORK_DIR}/build/consumer")
