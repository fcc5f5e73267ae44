# ptsim_embed(TARGET VAR FILE): compile FILE's text into TARGET as
# `extern const char VAR[]` (catalogs are data embedded in the binary).
function(ptsim_embed target var file)
  set(out ${CMAKE_CURRENT_BINARY_DIR}/embedded_${var}.cpp)
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DIN=${file} -DOUT=${out} -DVAR=${var} -P ${PROJECT_SOURCE_DIR}/cmake/embed_file.cmake
    DEPENDS ${file} ${PROJECT_SOURCE_DIR}/cmake/embed_file.cmake
    COMMENT "Embedding ${file}")
  target_sources(${target} PRIVATE ${out})
endfunction()
