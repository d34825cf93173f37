#!/bin/sh
# soname.sh LIB CC [ARGS...]: the SONAME of the library CC would link for LIB (e.g. libcurl.so).
# meson.build uses it so libnook dlopens exactly the library it was compiled against.
set -eu
lib=$1
shift
path=$("$@" -print-file-name="$lib")
path=$(readlink -f "$path")
objdump -p "$path" | awk '$1 == "SONAME" { print $2; found = 1 } END { exit !found }'
