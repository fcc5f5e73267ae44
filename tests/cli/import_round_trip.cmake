# `ptsim import KIND FILE … -o OUT`, then `ptsim run OUT --fold`: the imported scenario runs
# and its summary matches MATCH. IMPORT_ARGS is a ;-list after `ptsim import`.
set(ENV{CUDA_VISIBLE_DEVICES} "")
file(REMOVE ${OUT})
execute_process(COMMAND ${EXE} import ${IMPORT_ARGS} -o ${OUT} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err WORKING_DIRECTORY ${WORKDIR})
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ptsim import failed (${rc}):\n${out}\n${err}")
endif()
if(NOT err MATCHES "warning: [^\n]*ignored")
  message(FATAL_ERROR "ptsim import named no ignored flag on stderr:\n${err}")
endif()
execute_process(COMMAND ${EXE} run ${OUT} --fold RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                WORKING_DIRECTORY ${WORKDIR})
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ptsim run of the imported scenario failed (${rc}):\n${out}\n${err}")
endif()
if(NOT out MATCHES "${MATCH}")
  message(FATAL_ERROR "summary does not match '${MATCH}':\n${out}")
endif()
