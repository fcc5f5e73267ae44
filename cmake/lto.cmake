# PTSIM_LTO: link-time optimization of every Release target (CMake's IPO). The simulator's
# hot path crosses its libraries at every event (the replay in ptsim_sim_core calls the flow
# network in ptsim_hw), which the compiler can only inline across at link time. Measured at
# stop 40 (GCC 12, 2 cores): GPT-3 175B ZeRO-3 on 1,024 A100s runs 11 % fewer instructions
# and takes 13-17 % less time, with the same results; a full build takes 8.1 min instead
# of 5.6 min, so it is off by default (CI builds from scratch). README "Performance".
if(PTSIM_LTO)
  include(CheckIPOSupported)
  check_ipo_supported(RESULT ptsim_ipo_ok OUTPUT ptsim_ipo_why LANGUAGES CXX)
  if(ptsim_ipo_ok)
    set(CMAKE_INTERPROCEDURAL_OPTIMIZATION_RELEASE ON)
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      # GCC 12 warns at the optimizing link that std::string's operator+, once inlined, could
      # copy more than PTRDIFF_MAX bytes ("specified bound between 9223372036854775809 and
      # 18446744073709551615 exceeds maximum object size"): a path it cannot rule out, not
      # one the code takes; compiled one unit at a time the same sources do not warn.
      add_link_options($<$<CONFIG:Release>:-Wno-stringop-overflow>)
    endif()
  else()
    message(WARNING "PTSIM_LTO: this compiler cannot do link-time optimization (${ptsim_ipo_why}); building without it")
  endif()
endif()
