# Writes OUT: a C++ file defining `extern const char VAR[]` with IN's bytes.
file(READ ${IN} hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
file(WRITE ${OUT} "// Generated from ${IN}\nnamespace ptsim::embedded { extern const char ${VAR}[] = {${bytes} 0x00}; }\n")
