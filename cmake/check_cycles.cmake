# check_cycles.cmake - the ctest entry layers.no_cycles: no two files of lib/ or
# percpu/ call each other, directly or through others.
#   cmake -DNM=<nm> -DOBJECTS="<a.c.o>;<b.c.o>..." -P check_cycles.cmake
# A file calls another when its object leaves undefined a global symbol (a
# function, or a thread-local like spoke_tls_owner) that the other's object
# defines. Each file then sits on a floor above the files it calls; a call in
# both directions means the two are one room split across two files. Fails
# with every call that closes such a loop, and the symbols behind it. Calls
# through a static inline function of a header count where they are inlined,
# which is where they run.
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/spoke_check_util.cmake)
set(bad "")

# A file's name as its floor sees it (lib/engine.c), and a variable-safe key.
function(object_file obj out)
  get_filename_component(dir "${obj}" DIRECTORY)
  get_filename_component(floor "${dir}" NAME)
  get_filename_component(name "${obj}" NAME)
  string(REGEX REPLACE "\\.o(bj)?$" "" name "${name}")
  if(floor MATCHES "^(lib|percpu)$" AND name MATCHES "\\.c$")
    set(${out} "${floor}/${name}" PARENT_SCOPE)
  else()
    set(${out} "" PARENT_SCOPE)
  endif()
endfunction()
function(file_key f out)
  string(MAKE_C_IDENTIFIER "${f}" k)
  set(${out} "${k}" PARENT_SCOPE)
endfunction()

# Which file defines each global symbol; what each file leaves undefined.
set(files "")
foreach(obj IN LISTS OBJECTS)
  object_file("${obj}" f)
  if(NOT f)
    continue()
  endif()
  list(APPEND files "${f}")
  file_key("${f}" k)
  execute_process(COMMAND ${NM} -g --defined-only "${obj}"
    OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${NM} --defined-only ${obj} failed (${rc})")
  endif()
  string(REGEX MATCHALL "[0-9a-f]+ [A-Za-z] [A-Za-z_][A-Za-z0-9_.]*" lines "${out}")
  foreach(l IN LISTS lines)
    string(REGEX REPLACE "^[0-9a-f]+ [A-Za-z] " "" sym "${l}")
    set(defined_by_${sym} "${f}")
  endforeach()
  execute_process(COMMAND ${NM} -u "${obj}" OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${NM} -u ${obj} failed (${rc})")
  endif()
  string(REGEX MATCHALL "U [A-Za-z_][A-Za-z0-9_.]*" lines "${out}")
  string(REPLACE "U " "" undefined_${k} "${lines}")
endforeach()
list(LENGTH files nfiles)
if(nfiles LESS 10)
  list(APPEND bad "found only ${nfiles} objects of lib/ and percpu/ in OBJECTS: the object list is broken")
endif()

# The calls between files: calls_<a> lists the files a calls, via_<a>_<b> the symbols.
foreach(f IN LISTS files)
  file_key("${f}" k)
  set(calls_${k} "")
  foreach(sym IN LISTS undefined_${k})
    set(to "${defined_by_${sym}}")
    if(to AND NOT to STREQUAL f)
      file_key("${to}" tk)
      list(APPEND calls_${k} "${to}")
      list(APPEND via_${k}_${tk} "${sym}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES calls_${k})
endforeach()

# What each file reaches, through any number of calls (a closure: at most
# nfiles rounds).
foreach(f IN LISTS files)
  file_key("${f}" k)
  set(reach_${k} "${calls_${k}}")
  set(todo "${calls_${k}}")
  while(todo)
    list(POP_FRONT todo g)
    file_key("${g}" gk)
    foreach(h IN LISTS calls_${gk})
      if(NOT h IN_LIST reach_${k})
        list(APPEND reach_${k} "${h}")
        list(APPEND todo "${h}")
      endif()
    endforeach()
  endwhile()
endforeach()

# A call a -> b closes a loop when b reaches a back.
foreach(f IN LISTS files)
  file_key("${f}" k)
  foreach(to IN LISTS calls_${k})
    file_key("${to}" tk)
    if(f IN_LIST reach_${tk})
      list(JOIN via_${k}_${tk} " " syms)
      list(APPEND bad "${f} -> ${to} (${syms}), and ${to} reaches ${f} back")
    endif()
  endforeach()
endforeach()

spoke_check_verdict("${bad}" "the ${nfiles} files of lib/ and percpu/ call each other in no loop")
