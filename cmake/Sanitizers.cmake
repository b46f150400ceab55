# Sanitizer instrumentation, driven by the RTX_SANITIZE cache string
# (for example "address,undefined").  Empty means no instrumentation.
#
# rtx_target_sanitizers(<target>)
#   Adds the compile and link flags to <target> when RTX_SANITIZE is set.
include_guard(GLOBAL)

function(rtx_target_sanitizers target)
  if(NOT RTX_SANITIZE)
    return()
  endif()
  set(flags -fsanitize=${RTX_SANITIZE} -fno-omit-frame-pointer)
  if(RTX_SANITIZE MATCHES "undefined")
    list(APPEND flags -fno-sanitize-recover=undefined)
  endif()
  target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${flags}>")
  if(CMAKE_CUDA_COMPILER_LOADED)
    # nvcc splits -Xcompiler arguments at commas, so pass one flag per
    # sanitizer instead of the comma separated list.
    string(REPLACE "," ";" sanitizer_list "${RTX_SANITIZE}")
    set(cuda_flags -Xcompiler=-fno-omit-frame-pointer)
    foreach(sanitizer IN LISTS sanitizer_list)
      list(APPEND cuda_flags -Xcompiler=-fsanitize=${sanitizer})
    endforeach()
    if(RTX_SANITIZE MATCHES "undefined")
      list(APPEND cuda_flags -Xcompiler=-fno-sanitize-recover=undefined)
    endif()
    target_compile_options(${target} PRIVATE
      "$<$<COMPILE_LANGUAGE:CUDA>:${cuda_flags}>")
  endif()
  target_link_options(${target} PRIVATE ${flags})
endfunction()
