# Determinism and output (README "Reliability"), one MODE per test:
#   repeat         `ptsim run SCENARIO ARGS` 5 times: byte-identical JSON apart from sim_wall_time_s
#   search_threads `ptsim search SCENARIO --threads 1` and `--threads 2`: byte-identical JSON
#   json_stdout    `ptsim run SCENARIO ARGS --json -` writes the JSON, and only it, to stdout: the
#                  same bytes as `--json FILE` (apart from sim_wall_time_s), valid JSON
set(ENV{CUDA_VISIBLE_DEVICES} "")
set(ENV{OMPI_ALLOW_RUN_AS_ROOT} 1)
set(ENV{OMPI_ALLOW_RUN_AS_ROOT_CONFIRM} 1)
separate_arguments(extra UNIX_COMMAND "${ARGS}")

# Runs ptsim with the given arguments plus `--json <file>`; reads the file into `var`.
function(json_of var file)
  execute_process(COMMAND ${EXE} ${ARGN} --json ${file} RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err
                  WORKING_DIRECTORY ${WORKDIR})
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "ptsim ${ARGN} failed (${rc}):\n${err}")
  endif()
  file(READ ${file} text)
  set(${var} "${text}" PARENT_SCOPE)
endfunction()

# The one field that may differ between runs: the simulator's own wall time.
function(without_wall_time var text)
  string(REGEX REPLACE "\"sim_wall_time_s\": [-+0-9.eE]+" "\"sim_wall_time_s\": <wall time>" text "${text}")
  set(${var} "${text}" PARENT_SCOPE)
endfunction()

function(expect_same what a b)
  if(NOT a STREQUAL b)
    file(WRITE ${OUTDIR}/${what}.a.json "${a}")
    file(WRITE ${OUTDIR}/${what}.b.json "${b}")
    message(FATAL_ERROR "${what}: the outputs differ (diff ${OUTDIR}/${what}.a.json ${OUTDIR}/${what}.b.json)")
  endif()
endfunction()

get_filename_component(name ${SCENARIO} NAME_WE)
set(base ${OUTDIR}/determinism_${MODE}_${name})
if(MODE STREQUAL "repeat")
  json_of(first ${base}_0.json run ${SCENARIO} ${extra})
  if(NOT first MATCHES "\"sim_wall_time_s\"")
    message(FATAL_ERROR "no sim_wall_time_s in the JSON:\n${first}")
  endif()
  without_wall_time(first "${first}")
  foreach(i RANGE 1 4)
    json_of(again ${base}_${i}.json run ${SCENARIO} ${extra})
    without_wall_time(again "${again}")
    expect_same(${name}_run_${i} "${first}" "${again}")
  endforeach()
elseif(MODE STREQUAL "search_threads")
  json_of(one ${base}_t1.json search ${SCENARIO} --no-progress -q ${extra} --threads 1)
  json_of(two ${base}_t2.json search ${SCENARIO} --no-progress -q ${extra} --threads 2)
  expect_same(${name}_search_threads "${one}" "${two}")
elseif(MODE STREQUAL "json_stdout")
  json_of(in_file ${base}.json run ${SCENARIO} ${extra})
  execute_process(COMMAND ${EXE} run ${SCENARIO} ${extra} --json - RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err WORKING_DIRECTORY ${WORKDIR})
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "--json - failed (${rc}):\n${err}")
  endif()
  string(JSON mfu ERROR_VARIABLE bad GET "${out}" mfu)
  if(bad)
    message(FATAL_ERROR "stdout is not the result JSON (${bad}):\n${out}")
  endif()
  without_wall_time(in_file "${in_file}")
  without_wall_time(out "${out}")
  expect_same(${name}_json_stdout "${in_file}" "${out}")
else()
  message(FATAL_ERROR "unknown MODE '${MODE}'")
endif()
