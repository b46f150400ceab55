# Use ccache as compiler launcher when it is available and the user did not
# choose a launcher already.  Disable with -DRTX_USE_CCACHE=OFF.
include_guard(GLOBAL)

option(RTX_USE_CCACHE "Use ccache as compiler launcher when found" ON)

if(RTX_USE_CCACHE)
  find_program(RTX_CCACHE_PROGRAM ccache)
  mark_as_advanced(RTX_CCACHE_PROGRAM)
  if(RTX_CCACHE_PROGRAM)
    foreach(lang IN ITEMS C CXX CUDA)
      if(NOT DEFINED CMAKE_${lang}_COMPILER_LAUNCHER AND NOT DEFINED ENV{CMAKE_${lang}_COMPILER_LAUNCHER})
        set(CMAKE_${lang}_COMPILER_LAUNCHER "${RTX_CCACHE_PROGRAM}")
      endif()
    endforeach()
    message(STATUS "rtx: using ccache (${RTX_CCACHE_PROGRAM})")
  endif()
endif()
