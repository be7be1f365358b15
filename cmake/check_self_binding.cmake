# check_self_binding.cmake - the ctest entry abi.self_binding: libspoke.so
# calls its own functions directly and reaches its thread-locals without
# __tls_get_addr (CMakeLists.txt: -fno-semantic-interposition,
# -ftls-model=initial-exec, -Bsymbolic-functions). A PLT hop or a TLS call on
# every start and cancel made the shared library about 10 % slower than the
# static one (docs/design/service.md, "What a call costs").
#   cmake -DLIB=<libspoke.so> -DREADELF=<readelf> -P check_self_binding.cmake
cmake_minimum_required(VERSION 3.25)
execute_process(COMMAND ${READELF} -rW ${LIB} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${READELF} -rW ${LIB} failed (${rc})")
endif()
string(REPLACE "\n" ";" lines "${out}")
set(bad "")
foreach(l IN LISTS lines)
  if(l MATCHES "(JUMP_SLOT|GLOB_DAT).* (spoke_[a-z0-9_]+)")
    list(APPEND bad "its own ${CMAKE_MATCH_2} is bound at run time (${CMAKE_MATCH_1})")
  elseif(l MATCHES "__tls_get_addr|DTPMOD64|DTPOFF64")
    list(APPEND bad "a thread-local is reached through __tls_get_addr: ${l}")
  endif()
endforeach()
if(bad)
  list(REMOVE_DUPLICATES bad)
  list(JOIN bad "\n" msg)
  message(FATAL_ERROR "${msg}")
endif()
message(STATUS "libspoke.so binds its own calls and thread-locals at link time")
