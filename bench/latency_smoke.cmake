# SPDX-License-Identifier: LGPL-2.1-or-later
# ctest bench.latency.quick: bench_smoke.cmake's checks of `spoke-bench
# latency --quick --json` (exit 0, no error row - an early fire is one - no
# sanitizer report), then, for each cell of the quick grid (1e3 pending,
# tick 1 ms, without and with the start/cancel load), a row with p50, p99,
# p99.9 and max; and the stolen-CPU row of every column: its percentiles,
# or skipped with a reason (SCHED_FIFO refused, or no second CPU).
# Usage: cmake -DBENCH=/path/to/spoke-bench -P latency_smoke.cmake
set(SUB latency)
set(WORKLOADS lateness)
include(${CMAKE_CURRENT_LIST_DIR}/bench_smoke.cmake)
foreach(load none start-cancel)
  set(cell "\"pending\":1000,\"tick_us\":1000,\"load\":\"${load}\"")
  if(NOT out MATCHES "${cell}[^\n]*\"p50_us\":[0-9.]+,\"p99_us\":[0-9.]+,\"p999_us\":[0-9.]+,\"max_us\":[0-9.]+")
    message(FATAL_ERROR "no percentiles for pending 1e3, tick 1 ms, load ${load}:\n${out}")
  endif()
endforeach()
if(NOT out MATCHES "\"workload\":\"stolen-cpu\",\"rescue\":\"off\"[^\n]*(\"p99_us\":[0-9.]+,\"p999_us\":[0-9.]+,\"max_us\":[0-9.]+|\"skipped\":\"[^\"]+\")")
  message(FATAL_ERROR "no stolen-cpu row (measured or skipped with a reason):\n${out}")
endif()
