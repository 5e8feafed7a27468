# README.md's static-linking line, run as written: install the build into a fresh prefix,
# take the README's `cc ... lookback-static ...` line verbatim (my_model.c is
# tests/static_link_program.c), build it with PKG_CONFIG_PATH pointing at the prefix,
# check that the program needs no liblookback at run time, and run it.
# -DSOURCE_DIR=... -DBUILD_DIR=... -DWORK_DIR=...
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed: ${err}")
endif()
file(STRINGS ${SOURCE_DIR}/README.md lines REGEX "^    cc my_model\\.c .*lookback-static")
list(LENGTH lines n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "README.md: expected one `cc my_model.c ... lookback-static ...` line, found ${n}")
endif()
string(STRIP "${lines}" line)
message(STATUS "README: ${line}")
configure_file(${SOURCE_DIR}/tests/static_link_program.c ${WORK_DIR}/my_model.c COPYONLY)
execute_process(COMMAND sh -c "${line}" WORKING_DIRECTORY ${WORK_DIR}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the README's line failed (exit ${rc}): ${out}${err}")
endif()
execute_process(COMMAND readelf -d ${WORK_DIR}/my_model RESULT_VARIABLE rc OUTPUT_VARIABLE dyn)
if(NOT rc EQUAL 0 OR dyn MATCHES "liblookback")
  message(FATAL_ERROR "my_model needs a lookback shared library at run time:\n${dyn}")
endif()
execute_process(COMMAND ${WORK_DIR}/my_model WORKING_DIRECTORY ${WORK_DIR}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "softmax 0\\.090031\nseq_len 12\n")
  message(FATAL_ERROR "my_model: exit ${rc}, printed:\n${out}${err}")
endif()
file(REMOVE_RECURSE ${WORK_DIR})
