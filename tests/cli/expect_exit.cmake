# Runs EXE with ARGS (a ;-list), checks the exit code is EXPECT and, when given,
# that stderr/stdout contain MATCH. STDOUT_FILE, when set, receives stdout. ENVS (a ;-list of NAME=VALUE) is set in the environment first.
# MKFIFO, when set, is a path made a FIFO (with no writer) first: an input that must not hang.
set(ENV{CUDA_VISIBLE_DEVICES} "")  # tests never touch a GPU
if(DEFINED MKFIFO AND NOT MKFIFO STREQUAL "")
  file(REMOVE ${MKFIFO})
  execute_process(COMMAND mkfifo ${MKFIFO} RESULT_VARIABLE fifo_rc)
  if(NOT fifo_rc EQUAL 0)
    message(FATAL_ERROR "mkfifo ${MKFIFO} failed")
  endif()
endif()
foreach(kv ${ENVS})
  string(FIND "${kv}" "=" eq)
  string(SUBSTRING "${kv}" 0 ${eq} name)
  math(EXPR from "${eq} + 1")
  string(SUBSTRING "${kv}" ${from} -1 value)
  set(ENV{${name}} "${value}")
endforeach()
if(DEFINED STDOUT_FILE AND NOT STDOUT_FILE STREQUAL "")  # e.g. /dev/full: stdout that cannot be written
  execute_process(COMMAND ${EXE} ${ARGS} RESULT_VARIABLE rc OUTPUT_FILE ${STDOUT_FILE} ERROR_VARIABLE err
                  WORKING_DIRECTORY ${WORKDIR})
  set(out "")
else()
  execute_process(COMMAND ${EXE} ${ARGS} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                  WORKING_DIRECTORY ${WORKDIR})
endif()
if(NOT rc EQUAL EXPECT)
  message(FATAL_ERROR "exit code ${rc}, expected ${EXPECT}\nstdout:\n${out}\nstderr:\n${err}")
endif()
if(DEFINED MATCH AND NOT "${out}${err}" MATCHES "${MATCH}")
  message(FATAL_ERROR "output does not match '${MATCH}'\nstdout:\n${out}\nstderr:\n${err}")
endif()
