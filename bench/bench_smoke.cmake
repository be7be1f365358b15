# SPDX-License-Identifier: LGPL-2.1-or-later
# ctest smoke test of one spoke-bench subcommand: `spoke-bench <SUB> --quick
# --json` must exit 0 and print no "error" row and no sanitizer report (a
# report in a forked run does not change its exit status: TSan goes on, and
# the run ends with _exit), and then whatever the options below ask for.
#
# Usage: cmake -DBENCH=<spoke-bench> -DSUB=<subcommand> [options] -P bench_smoke.cmake
# Lists are comma-separated (a ';' would split the ctest command line).
#   -DWORKLOADS=a,b       each workload has a row
#   -DSUBJECTS=x,y        with KEY and N: every subject x workload has a row
#   -DKEY=scheme          at n=N ({"<KEY>":"x","workload":"a","n":N,...}):
#   -DN=1000              measured ("ns_per_op") or one of the ALLOW kinds
#   -DCELLS=x/a,y/b       more cells like those, subject/workload
#   -DALLOW=skipped,cap   the kinds a cell may have instead of a figure
#                         (default: skipped)
#   -DMIN_MEASURED=k      at least k of the cells measured
#   -DFIELD=a/f           the row of workload a carries the field f
#   -DPOSITIVE=a/f,b/g    ... and each such field is above 0 in every row of its
#                         workload (what a check run must have counted)
#   -DARGS=x,y            more arguments after --quick --json
if(NOT BENCH OR NOT SUB)
  message(FATAL_ERROR "pass -DBENCH=<spoke-bench> -DSUB=<subcommand>")
endif()
foreach(v WORKLOADS SUBJECTS CELLS ALLOW POSITIVE ARGS)
  string(REPLACE "," ";" ${v} "${${v}}")
endforeach()
if(NOT ALLOW)
  set(ALLOW skipped)
endif()

execute_process(COMMAND ${BENCH} ${SUB} --quick --json ${ARGS}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "spoke-bench ${SUB} --quick --json ${ARGS} exited with ${rc}\n${out}\n${err}")
endif()
if(err MATCHES "Sanitizer|runtime error:")
  message(FATAL_ERROR "sanitizer report:\n${err}")
endif()
if(out MATCHES "\"error\":")
  message(FATAL_ERROR "error rows:\n${out}")
endif()

# Cells: every subject x workload when SUBJECTS are given, plus CELLS.
set(cells ${CELLS})
if(SUBJECTS)
  foreach(s ${SUBJECTS})
    foreach(w ${WORKLOADS})
      list(APPEND cells "${s}/${w}")
    endforeach()
  endforeach()
else()
  foreach(w ${WORKLOADS})
    string(FIND "${out}" "\"workload\":\"${w}\"" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "no row for workload ${w}:\n${out}")
    endif()
  endforeach()
endif()

set(nmeasured 0)
list(LENGTH cells ncells)
foreach(c ${cells})
  string(REPLACE "/" ";" sw "${c}")
  list(GET sw 0 s)
  list(GET sw 1 w)
  set(row "{\"${KEY}\":\"${s}\",\"workload\":\"${w}\",\"n\":${N},")
  string(FIND "${out}" "${row}\"ns_per_op\":" at)
  if(NOT at EQUAL -1)
    math(EXPR nmeasured "${nmeasured} + 1")
    continue()
  endif()
  set(found FALSE)
  foreach(kind ${ALLOW})
    string(FIND "${out}" "${row}\"${kind}\":" at)
    if(NOT at EQUAL -1)
      set(found TRUE)
    endif()
  endforeach()
  if(NOT found)
    message(FATAL_ERROR "no row (measured or ${ALLOW}) for ${s} ${w} at n=${N}:\n${out}")
  endif()
endforeach()
if(MIN_MEASURED AND nmeasured LESS MIN_MEASURED)
  message(FATAL_ERROR "only ${nmeasured} of ${ncells} cells at n=${N} were measured:\n${out}")
endif()

if(FIELD)
  string(REPLACE "/" ";" wf "${FIELD}")
  list(GET wf 0 w)
  list(GET wf 1 f)
  if(NOT out MATCHES "\"workload\":\"${w}\"[^\n]*\"${f}\":")
    message(FATAL_ERROR "no ${f} in the ${w} row:\n${out}")
  endif()
endif()
foreach(wf ${POSITIVE})
  string(REPLACE "/" ";" wf "${wf}")
  list(GET wf 0 w)
  list(GET wf 1 f)
  string(REGEX MATCHALL "\"workload\":\"${w}\"[^\n]*" rows "${out}")
  if(NOT rows)
    message(FATAL_ERROR "no ${w} row:\n${out}")
  endif()
  foreach(row ${rows})
    if(NOT row MATCHES "\"${f}\":([0-9.]+)" OR NOT CMAKE_MATCH_1 GREATER 0)
      message(FATAL_ERROR "${f} is not above 0 in a ${w} row:\n${row}")
    endif()
  endforeach()
endforeach()
if(cells)
  message(STATUS "spoke-bench ${SUB} --quick: rows for all ${ncells} cells, ${nmeasured} measured")
else()
  message(STATUS "spoke-bench ${SUB} --quick: every workload reported\n${err}")
endif()
