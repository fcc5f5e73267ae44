# `mpirun -n 2 ptsim search` must write the same JSON as the single-process search
# (the waves of the branch and bound are exchanged between ranks, so what gets
# simulated and the ranking do not depend on the process count). Skipped (exit 77)
# when mpirun is missing. CI runs as root without a TTY.
set(ENV{CUDA_VISIBLE_DEVICES} "")
set(ENV{OMPI_ALLOW_RUN_AS_ROOT} 1)
set(ENV{OMPI_ALLOW_RUN_AS_ROOT_CONFIRM} 1)
find_program(MPIRUN mpirun)
if(NOT MPIRUN)
  message("mpirun not found: skipped")
  cmake_language(EXIT 77)
endif()
set(args search ${SCENARIO} --no-progress -q --top 5)
execute_process(COMMAND ${EXE} ${args} --threads 2 --json ${OUTDIR}/search_single.json RESULT_VARIABLE rc1
                ERROR_VARIABLE err1 WORKING_DIRECTORY ${WORKDIR})
if(NOT rc1 EQUAL 0)
  message(FATAL_ERROR "single-process search failed (${rc1}):\n${err1}")
endif()
execute_process(COMMAND ${MPIRUN} --allow-run-as-root --oversubscribe -n 2 ${EXE} ${args} --threads 1
                        --json ${OUTDIR}/search_mpi.json
                RESULT_VARIABLE rc2 OUTPUT_VARIABLE out2 ERROR_VARIABLE err2 WORKING_DIRECTORY ${WORKDIR})
if(NOT rc2 EQUAL 0)
  message(FATAL_ERROR "mpirun search failed (${rc2}):\n${out2}\n${err2}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${OUTDIR}/search_single.json ${OUTDIR}/search_mpi.json
                RESULT_VARIABLE same)
if(NOT same EQUAL 0)
  file(READ ${OUTDIR}/search_single.json a)
  file(READ ${OUTDIR}/search_mpi.json b)
  message(FATAL_ERROR "MPI search differs from single-process search\nsingle:\n${a}\nmpi:\n${b}")
endif()
