# SPDX-License-Identifier: LGPL-2.1-or-later
# ctest bench.service.quick: `spoke-bench service --quick --json` must exit 0,
# print a result row (no "error") for every workload, and no sanitizer report.
# Usage: cmake -DBENCH=/path/to/spoke-bench -P service_smoke.cmake
if(NOT BENCH)
  message(FATAL_ERROR "pass -DBENCH=<spoke-bench>")
endif()
execute_process(COMMAND ${BENCH} service --quick --json
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "spoke-bench service --quick --json exited with ${rc}\n${out}\n${err}")
endif()
# A sanitizer report in a forked run does not change its exit status (TSan
# goes on after a report; the run ends with _exit): look for one.
if(err MATCHES "Sanitizer|runtime error:")
  message(FATAL_ERROR "sanitizer report:\n${err}")
endif()
if(out MATCHES "\"error\":")
  message(FATAL_ERROR "error rows:\n${out}")
endif()
foreach(w own-start-cancel engine-start-stop cross-start-cancel mutex-start-stop
          cross-start mutex-start reset mutex-reset fire-inline fire-pool lateness memory)
  string(FIND "${out}" "\"workload\":\"${w}\"" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "no row for workload ${w}:\n${out}")
  endif()
endforeach()
string(REGEX MATCHALL "\"workload\":\"lateness\"[^\n]*\"p99_us\":" late "${out}")
list(LENGTH late nlate)
if(nlate LESS 1)
  message(FATAL_ERROR "no lateness percentiles:\n${out}")
endif()
message(STATUS "spoke-bench service --quick: every workload reported\n${err}")
