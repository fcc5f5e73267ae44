# docs/scenario-keys.md is generated from the key table the scenario reader uses: fails
# when they differ. Regenerate with: ./build/ptsim list keys --markdown > docs/scenario-keys.md
execute_process(COMMAND ${EXE} list keys --markdown RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ptsim list keys --markdown failed (${rc}):\n${err}")
endif()
file(READ ${DOC} expected)
if(NOT out STREQUAL expected)
  message(FATAL_ERROR "${DOC} differs from `ptsim list keys --markdown`; regenerate it:\n"
                      "  ./build/ptsim list keys --markdown > docs/scenario-keys.md")
endif()
