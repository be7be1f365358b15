# check_man.cmake - the ctest entry man.lint: the man pages of man/man3.
#   cmake -DMANDIR=<man/man3> -DGROFF=<groff> [-DMAN=<man>] -DHEADERS="<h1>;<h2>"
#         -P check_man.cmake
# Fails on
#   - any output of `groff -mandoc -ww -z` (every warning enabled) on a page,
#     or of `man --warnings -l` (man-db, if MAN is given);
#   - a page without NAME, LIBRARY, SYNOPSIS, DESCRIPTION, THREADS, SEE ALSO;
#   - a `.so man3/x.3` link whose target is missing, or whose target's NAME
#     section does not list the link's name;
#   - an `.Xr spoke_* 3` reference to a page that does not exist;
#   - a function declared in include/spoke/*.h (static inline ones included)
#     without its page.
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/spoke_check_util.cmake)
file(GLOB pages "${MANDIR}/*.3")
set(bad "")
set(names "")
foreach(p IN LISTS pages)
  get_filename_component(name "${p}" NAME_WE)
  list(APPEND names ${name})
endforeach()
foreach(p IN LISTS pages)
  get_filename_component(name "${p}" NAME_WE)
  file(READ "${p}" text)
  if(text MATCHES "^\\.so man3/([a-z0-9_]+)\\.3\n$")
    set(target ${CMAKE_MATCH_1})
    if(NOT EXISTS "${MANDIR}/${target}.3")
      list(APPEND bad "${name}.3 links to the missing ${target}.3")
    else()
      file(READ "${MANDIR}/${target}.3" ttext)
      if(NOT ttext MATCHES "\n\\.Nm ${name}( ,)?\n")
        list(APPEND bad "${name}.3 links to ${target}.3, whose NAME does not list ${name}")
      endif()
    endif()
    continue()
  endif()
  execute_process(COMMAND ${GROFF} -mandoc -ww -z -Tutf8 "${p}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT "${out}${err}" STREQUAL "")
    list(APPEND bad "groff on ${name}.3 (${rc}): ${out}${err}")
  endif()
  if(MAN)
    execute_process(COMMAND ${CMAKE_COMMAND} -E env LC_ALL=C.UTF-8 MANWIDTH=80
            ${MAN} --warnings -E UTF-8 -l "${p}"
      RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
    if(NOT rc EQUAL 0 OR NOT "${err}" STREQUAL "")
      list(APPEND bad "man --warnings on ${name}.3 (${rc}): ${err}")
    endif()
  endif()
  foreach(sec NAME LIBRARY SYNOPSIS DESCRIPTION THREADS "SEE ALSO")
    if(NOT text MATCHES "\n\\.Sh ${sec}\n")
      list(APPEND bad "${name}.3 has no ${sec} section")
    endif()
  endforeach()
  string(REGEX MATCHALL "\n\\.Xr spoke[a-z0-9_]* 3" refs "${text}")
  foreach(r IN LISTS refs)
    string(REGEX REPLACE "^\n\\.Xr ([a-z0-9_]+) 3$" "\\1" ref "${r}")
    if(NOT ref IN_LIST names)
      list(APPEND bad "${name}.3 refers to ${ref}(3), which has no page")
    endif()
  endforeach()
endforeach()
# Every function of the public headers has its page.
spoke_public_functions(functions ${HEADERS})
foreach(fn IN LISTS functions)
  if(NOT fn IN_LIST names)
    list(APPEND bad "${fn} (include/spoke) has no man page")
  endif()
endforeach()
list(LENGTH pages n)
spoke_check_verdict("${bad}" "${n} man pages (links included) lint clean and cover the headers")
