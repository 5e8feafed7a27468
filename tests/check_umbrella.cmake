# ctest's lookback_h_includes: lookback.h, the one include of the installed library,
# must include every public header but data/h5io.h (which needs HDF5's headers) and
# tensor/api.h (which every header includes). Run as
#   cmake -DSOURCE_DIR=<source> -DHEADERS=<a|b|...> -P check_umbrella.cmake
file(READ "${SOURCE_DIR}/lookback.h" umbrella)
string(REPLACE "|" ";" headers "${HEADERS}")
set(missing "")
foreach(header IN LISTS headers)
  file(RELATIVE_PATH rel "${SOURCE_DIR}" "${header}")
  if(rel STREQUAL "data/h5io.h" OR rel STREQUAL "tensor/api.h")
    continue()
  endif()
  string(FIND "${umbrella}" "#include \"${rel}\"" at)
  if(at EQUAL -1)
    list(APPEND missing "${rel}")
  endif()
endforeach()
list(LENGTH headers n)
if(missing)
  message(FATAL_ERROR "lookback.h does not include these public headers: ${missing}")
endif()
message(STATUS "lookback.h includes every public header (${n} checked)")
