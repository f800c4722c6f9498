#!/bin/sh
# pack-libs.sh DEST BINARY...: copies into DEST every shared library the binaries load here (the
# GLib family and what it needs), so that they run on the GPU machine, which has none of them.
# The C and C++ runtimes and the NVIDIA driver's libraries stay behind: that machine has its own.
# There, LD_LIBRARY_PATH=DEST.
set -eu
[ $# -ge 2 ] || { echo "usage: pack-libs.sh DEST BINARY..." >&2; exit 2; }
dest=$1
shift
mkdir -p "$dest"
for binary in "$@"; do
  ldd "$binary" | sed -n 's|.*=> \(/[^ ]*\) .*|\1|p'
done | sort -u | while read -r path; do
  case ${path##*/} in
    libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | libresolv.so* | ld-linux* | \
      libstdc++.so* | libgcc_s.so* | libcuda.so* | libnvidia*) ;;
    *) cp -L "$path" "$dest/" ;;
  esac
done
echo "pack-libs: $(ls "$dest" | wc -l) libraries, $(du -sh "$dest" | cut -f1), in $dest"
