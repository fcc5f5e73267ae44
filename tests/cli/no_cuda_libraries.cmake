# The ptsim executable must start where CUDA is absent: none of its dynamic dependencies,
# direct or transitive (ldd), is a CUDA library. When the CUDA module was built (MODULE set),
# it must link them — which also shows this check can see them.
set(cuda_libs "lib(cuda|cudart|cublas|cublasLt|cudnn[a-z_]*|nccl|nvrtc)\\.so")
execute_process(COMMAND ldd ${EXE} RESULT_VARIABLE rc OUTPUT_VARIABLE deps ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ldd ${EXE} failed: ${err}")
endif()
if(deps MATCHES "${cuda_libs}")
  message(FATAL_ERROR "${EXE} depends on a CUDA library (${CMAKE_MATCH_0}):\n${deps}")
endif()
if(MODULE)
  execute_process(COMMAND readelf -d --wide ${MODULE} RESULT_VARIABLE rc OUTPUT_VARIABLE needed ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT needed MATCHES "NEEDED[^\n]*libcudart")
    message(FATAL_ERROR "the CUDA module ${MODULE} does not link libcudart: ${needed}${err}")
  endif()
endif()
