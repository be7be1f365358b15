# SPDX-License-Identifier: LGPL-2.1-or-later
# ctest bench.schemes.quick: `spoke-bench schemes --quick --json` must exit 0
# and print a row for every one of the eight schemes and every workload (W1,
# W2-advance, W2-tick, W3) at n=1000: measured (ns_per_op) or skipped with its
# reason (--quick gives each cell a 0.2 s budget); no error row, no sanitizer
# report, and at least MIN_MEASURED (default 24) of the 32 cells measured.
# Usage: cmake -DBENCH=/path/to/spoke-bench -P schemes_smoke.cmake
if(NOT BENCH)
  message(FATAL_ERROR "pass -DBENCH=<spoke-bench>")
endif()
execute_process(COMMAND ${BENCH} schemes --quick --json
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "spoke-bench schemes --quick --json exited with ${rc}\n${out}\n${err}")
endif()
if(err MATCHES "Sanitizer|runtime error:")
  message(FATAL_ERROR "sanitizer report:\n${err}")
endif()
if(out MATCHES "\"error\":")
  message(FATAL_ERROR "error rows:\n${out}")
endif()
set(nmeasured 0)
foreach(s list sorted-list heap wheel hashed-sorted hashed hierarchical lawn)
  foreach(w W1 W2-advance W2-tick W3)
    set(row "{\"scheme\":\"${s}\",\"workload\":\"${w}\",\"n\":1000,")
    string(FIND "${out}" "${row}\"ns_per_op\":" measured)
    string(FIND "${out}" "${row}\"skipped\":" skipped)
    if(measured EQUAL -1 AND skipped EQUAL -1)
      message(FATAL_ERROR "no row for ${s} ${w} at n=1000:\n${out}")
    endif()
    if(NOT measured EQUAL -1)
      math(EXPR nmeasured "${nmeasured} + 1")
    endif()
  endforeach()
endforeach()
# Under sanitizers --quick skips most cells on its budget; without them most run.
if(NOT MIN_MEASURED)
  set(MIN_MEASURED 24)
endif()
if(nmeasured LESS MIN_MEASURED)
  message(FATAL_ERROR "only ${nmeasured} of 32 cells at n=1000 were measured:\n${out}")
endif()
message(STATUS "spoke-bench schemes --quick: rows for all 8 schemes x 4 workloads, ${nmeasured} measured")
