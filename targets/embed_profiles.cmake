# Writes OUT (a .cpp) embedding every targets/profiles/*.json as a string, so
# the mlk binary carries its profiles. Run at build time by CMakeLists.txt.
file(GLOB files "${SRC}/*.json")
list(SORT files)
set(body "")
foreach (f ${files})
  get_filename_component(name ${f} NAME)
  file(READ ${f} text)
  string(APPEND body "      {\"${name}\", R\"mlkjson(${text})mlkjson\"},\n")
endforeach ()
file(WRITE ${OUT}.tmp "// Generated from targets/profiles/*.json by targets/embed_profiles.cmake.\n#include \"targets/profiles_embedded.h\"\nnamespace mlk {\nconst std::vector<std::pair<std::string, std::string>>& embedded_profiles() {\n  static const std::vector<std::pair<std::string, std::string>> v = {\n${body}  };\n  return v;\n}\n}  // namespace mlk\n")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
