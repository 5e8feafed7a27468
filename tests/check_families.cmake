# ctest's family_table_rule: a model family is known by its file and its row of the family
# table (layers/family.h), never by switches on lb_model_kind elsewhere. Outside the family
# files (layers/family*.c) no source of the library, the command, the benchmarks or the
# examples compares a kind with a family's value (== / != / < / > LB_MODEL_X), has a
# `case LB_MODEL_X:`, or loops over the enum's range (`<= LB_MODEL_X`; the table's
# lb_family_at and LB_MODEL_KIND_COUNT do that). Naming a family to build one
# (lb_model_config_default(LB_MODEL_LSTM, ...)) is allowed. Run as  cmake -DSOURCE_DIR=<source> -P check_families.cmake
set(dirs tensor kernels autograd layers optim data train lab cli bench examples)
set(bad "")
set(checked 0)
set(value "LB_MODEL_(TRANSFORMER|LOCAL|LSTM|CONV|[A-Z_]+)")
foreach(dir IN LISTS dirs)
  file(GLOB files "${SOURCE_DIR}/${dir}/*.c" "${SOURCE_DIR}/${dir}/*.h" "${SOURCE_DIR}/${dir}/*.def")
  foreach(f IN LISTS files)
    file(RELATIVE_PATH rel "${SOURCE_DIR}" "${f}")
    if(rel MATCHES "^layers/family[^/]*\\.c$")
      continue()
    endif()
    math(EXPR checked "${checked} + 1")
    file(STRINGS "${f}" lines)
    set(n 0)
    foreach(line IN LISTS lines)
      math(EXPR n "${n} + 1")
      if(line MATCHES "(==|!=|<=|>=|[^->]>|[^<]<)[ \t]*${value}" OR line MATCHES "${value}[ \t]*(==|!=)"
         OR line MATCHES "case[ \t]+${value}" OR line MATCHES "kind_is_attention")
        if(NOT line MATCHES "LB_MODEL_KIND_COUNT|LB_MODEL_FIELD" AND NOT line MATCHES "^[ \t]*(/\\*|\\*)")
          list(APPEND bad "${rel}:${n}: ${line}")
        endif()
      endif()
    endforeach()
  endforeach()
endforeach()
if(bad)
  string(REPLACE ";" "\n  " text "${bad}")
  message(FATAL_ERROR "a model family is switched on outside its file and the family table (layers/family.h):\n  ${text}")
endif()
message(STATUS "family table rule holds in ${checked} files")
