# What the embedding scripts share (embed_lua.cmake, embed_protos.cmake,
# each run with cmake -P, include this file).

# embed_hex(PATH VAR): the bytes of the file PATH, as the elements of a C
# array initializer ("0x73,0x79,", sixteen a line), into VAR.
function(embed_hex path var)
  file(READ "${path}" hex HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
  string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" hex "${hex}")
  set(${var} "${hex}" PARENT_SCOPE)
endfunction()

# embed_write(OUT TEXT): TEXT into the file OUT, which keeps its time when it
# held TEXT already (nothing built from it is built again) and is then
# touched, so it is newer than what it is made from (or make would run the
# script again at every build).
function(embed_write out text)
  file(WRITE "${out}.tmp" "${text}")
  file(COPY_FILE "${out}.tmp" "${out}" ONLY_IF_DIFFERENT)
  file(REMOVE "${out}.tmp")
  file(TOUCH_NOCREATE "${out}")
endfunction()
