# Compiler warnings for rtx targets.
#
# rtx_target_warnings(<target>)
#   C++ sources get -Wall -Wextra; CUDA sources forward the same flags to the
#   host compiler through nvcc.  With RTX_WERROR=ON warnings become errors.
include_guard(GLOBAL)

function(rtx_target_warnings target)
  set(cxx_flags -Wall -Wextra)
  if(RTX_WERROR)
    list(APPEND cxx_flags -Werror)
  endif()
  target_compile_options(${target} PRIVATE
    "$<$<COMPILE_LANGUAGE:CXX>:${cxx_flags}>")

  if(CMAKE_CUDA_COMPILER_LOADED)
    set(cuda_host_flags "-Wall,-Wextra")
    if(RTX_WERROR)
      string(APPEND cuda_host_flags ",-Werror")
    endif()
    target_compile_options(${target} PRIVATE
      "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${cuda_host_flags}>")
  endif()
endfunction()
