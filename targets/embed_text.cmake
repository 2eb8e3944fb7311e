# Writes OUT (a .cpp) defining `const char* mlk::FUNC()` returning the text of
# IN. Run at build time by CMakeLists.txt.
file(READ ${IN} text)
string(FIND "${text}" ")mlktext\"" end_marker)
if (NOT end_marker EQUAL -1)
  message(FATAL_ERROR "${IN} holds the raw string's end marker )mlktext\" at byte ${end_marker}: it cannot be embedded")
endif ()
file(WRITE ${OUT}.tmp "// Generated from ${IN} by targets/embed_text.cmake.\nnamespace mlk {\nconst char* ${FUNC}() {\n  return R\"mlktext(${text})mlktext\";\n}\n}  // namespace mlk\n")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
