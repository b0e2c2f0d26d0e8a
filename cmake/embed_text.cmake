# Turns a text file into a C++ source defining `kb::cli::help_text()`.
file(READ ${INPUT} content)
string(LENGTH "${content}" length)
set(chunks "")
set(offset 0)
# Raw string literals have a length limit in some compilers: emit 2000-byte pieces.
while(offset LESS length)
  string(SUBSTRING "${content}" ${offset} 2000 piece)
  string(APPEND chunks "R\"KBTXT(${piece})KBTXT\"\n")
  math(EXPR offset "${offset} + 2000")
endwhile()
file(WRITE ${OUTPUT} "#include <string_view>\nnamespace kb::cli {\nstd::string_view help_text() {\n  static constexpr char text[] =\n${chunks};\n  return {text, sizeof(text) - 1};\n}\n}\n")
