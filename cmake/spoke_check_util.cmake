# spoke_check_util.cmake - what the cmake -P checks of the tests share
# (included by check_man.cmake and check_docs.cmake).

# spoke_public_functions(<out> <header>...): the functions the public headers
# declare, static inline ones included, in order, each once.
function(spoke_public_functions out)
  set(functions "")
  foreach(h IN LISTS ARGN)
    file(STRINGS ${h} hl REGEX "^(static inline )?[a-z].*[ *](spoke_[a-z0-9_]+)\\(")
    list(FILTER hl EXCLUDE REGEX "^typedef ")
    foreach(d IN LISTS hl)
      if(d MATCHES "[ *](spoke_[a-z0-9_]+)\\(") # not the part after a ';' of a declaration
        list(APPEND functions ${CMAKE_MATCH_1})
      endif()
    endforeach()
  endforeach()
  list(REMOVE_DUPLICATES functions)
  set(${out} "${functions}" PARENT_SCOPE)
endfunction()

# spoke_check_verdict(<bad list> <summary>): fail with every line of <bad list>,
# or say <summary>.
function(spoke_check_verdict bad summary)
  if(bad)
    list(JOIN bad "\n" msg)
    message(FATAL_ERROR "${msg}")
  endif()
  message(STATUS "${summary}")
endfunction()
