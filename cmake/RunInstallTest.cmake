# Install test, run by ctest as `cmake -P RunInstallTest.cmake`.
#
# Installs the rtx build tree RTX_BINARY_DIR into a scratch prefix under
# RTX_WORK_DIR, configures and builds the consumer project
# RTX_CONSUMER_SOURCE_DIR against it with find_package(rtx CONFIG REQUIRED),
# runs the consumer and checks its output.  Optional: the program to run,
# RTX_CONSUMER_PROGRAM (default rtx_consumer), its arguments RTX_CONSUMER_ARGS
# and a regular expression its output must match, RTX_CONSUMER_EXPECT
# (default "sum = 6").
foreach(var IN ITEMS RTX_BINARY_DIR RTX_CONSUMER_SOURCE_DIR RTX_WORK_DIR RTX_GENERATOR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "RunInstallTest.cmake: ${var} is not set")
  endif()
endforeach()
if(NOT RTX_CONFIG)
  set(RTX_CONFIG Release)
endif()
if(NOT RTX_CONSUMER_PROGRAM)
  set(RTX_CONSUMER_PROGRAM rtx_consumer)
endif()
if(NOT DEFINED RTX_CONSUMER_EXPECT)
  set(RTX_CONSUMER_EXPECT "sum = 6")
endif()

set(prefix "${RTX_WORK_DIR}/prefix")
set(build "${RTX_WORK_DIR}/build")
file(REMOVE_RECURSE "${RTX_WORK_DIR}")
file(MAKE_DIRECTORY "${RTX_WORK_DIR}")

function(run_step name)
  message(STATUS "install test: ${name}")
  execute_process(COMMAND ${ARGN}
    RESULT_VARIABLE result
    OUTPUT_VARIABLE output
    ERROR_VARIABLE output)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "install test: ${name} failed (${result}):\n${output}")
  endif()
  set(step_output "${output}" PARENT_SCOPE)
endfunction()

run_step("install into ${prefix}"
  "${CMAKE_COMMAND}" --install "${RTX_BINARY_DIR}" --prefix "${prefix}" --config "${RTX_CONFIG}")

set(configure_args -S "${RTX_CONSUMER_SOURCE_DIR}" -B "${build}" -G "${RTX_GENERATOR}"
  "-DCMAKE_PREFIX_PATH=${prefix}" "-DCMAKE_BUILD_TYPE=${RTX_CONFIG}"
  # Only the installed package may be found, never the build tree.
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
if(RTX_CXX_COMPILER)
  list(APPEND configure_args "-DCMAKE_CXX_COMPILER=${RTX_CXX_COMPILER}")
endif()
run_step("configure consumer" "${CMAKE_COMMAND}" ${configure_args})
run_step("build consumer" "${CMAKE_COMMAND}" --build "${build}" --config "${RTX_CONFIG}")

find_program(consumer ${RTX_CONSUMER_PROGRAM} PATHS "${build}" "${build}/${RTX_CONFIG}" NO_DEFAULT_PATH)
if(NOT consumer)
  message(FATAL_ERROR "install test: ${RTX_CONSUMER_PROGRAM} not found in ${build}")
endif()
run_step("run consumer" "${consumer}" ${RTX_CONSUMER_ARGS})
message(STATUS "consumer output:\n${step_output}")
if(NOT step_output MATCHES "${RTX_CONSUMER_EXPECT}")
  message(FATAL_ERROR "install test: unexpected consumer output:\n${step_output}")
endif()
message(STATUS "install test: passed")
