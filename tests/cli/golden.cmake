# Golden output (STYLE.md item 8, SimGrid's .tesh habit): runs `ptsim run SCENARIO
# --fold` and compares the summary with GOLDEN, leaving out the line with the wall
# time. After an intended change, regenerate with -DUPDATE=1 (see tests/golden/README).
set(ENV{CUDA_VISIBLE_DEVICES} "")
execute_process(COMMAND ${EXE} run ${SCENARIO} --fold RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                WORKING_DIRECTORY ${WORKDIR})
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ptsim run ${SCENARIO} failed (${rc}):\n${err}")
endif()
string(REGEX REPLACE "simulated [^\n]*\n" "" out "${out}")
if(UPDATE)
  file(WRITE ${GOLDEN} "${out}")
  return()
endif()
file(READ ${GOLDEN} expected)
if(NOT out STREQUAL expected)
  message(FATAL_ERROR "summary of ${SCENARIO} differs from ${GOLDEN}\n--- expected\n${expected}\n--- got\n${out}")
endif()
