# The standard library's modules (std/*.tl) compiled into mlk: generates a
# .cpp with each module's text (lang/modules.h, std_module_text) into the
# current binary dir and sets OUT_VAR to its path. Configure reruns when a
# module changes.
function(mlk_std_modules ROOT OUT_VAR)
  file(GLOB _mods CONFIGURE_DEPENDS "${ROOT}/std/*.tl")
  list(SORT _mods)
  set(_table "")
  foreach(_f ${_mods})
    get_filename_component(_n ${_f} NAME_WE)
    file(READ ${_f} _text)
    string(APPEND _table "    {\"std.${_n}\", R\"mlkstd(${_text})mlkstd\"},\n")
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_f})
  endforeach()
  set(MLK_STD_TABLE "${_table}")
  configure_file(${ROOT}/lang/std_modules.cpp.in ${CMAKE_CURRENT_BINARY_DIR}/generated/std_modules.cpp @ONLY)
  set(${OUT_VAR} ${CMAKE_CURRENT_BINARY_DIR}/generated/std_modules.cpp PARENT_SCOPE)
endfunction()
