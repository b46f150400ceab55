# What rtx's shared objects export.
#
# rtx_private_static_archives(<target>)
#   Code the target pulls in from static archives (a toolchain that links libstdc++ statically,
#   libculibos, ...) stays private to it. Exported, such a copy would be lent to whatever the
#   process loads next: a libstdc++.so loaded beside librtx would bind its own functions to ours,
#   and a later library (PyTorch, imported after rustytorch) would then free through one copy what
#   it allocated through the other.
include_guard(GLOBAL)

function(rtx_private_static_archives target)
  if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
    target_link_options(${target} PRIVATE "LINKER:--exclude-libs,ALL")
  endif()
endfunction()
