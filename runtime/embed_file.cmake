# Writes OUTPUT, a C++ file defining stepc::EmbeddedCorpus() with the bytes of INPUT.
file(READ ${INPUT} hex HEX)
string(REGEX REPLACE "(..)" "0x\\1," bytes "${hex}")
file(WRITE ${OUTPUT} "// Generated from ${INPUT}; do not edit.\n#include \"runtime/formats/data.h\"\n"
  "namespace stepc {\nnamespace { const unsigned char kCorpus[] = {${bytes}}; }\n"
  "const std::string& EmbeddedCorpus() {\n"
  "  static const std::string* text = new std::string(reinterpret_cast<const char*>(kCorpus), sizeof(kCorpus));\n"
  "  return *text;\n}\n}  // namespace stepc\n")
