#!/bin/sh
# A real shared library built on Debian 12 (glibc 2.36): pthread_create moved into libc in glibc 2.34, so a
# library that calls it needs GLIBC_2.34, which manylinux_2_28 does not allow (the tag would be manylinux_2_34).
# Rebuild: sh build.sh (gcc). The tests read the committed file; this records how it was made.
set -e
cd "$(dirname "$0")"
cat > needs_glibc_2_34.c <<'C'
#include <pthread.h>
static void *run(void *arg) { return arg; }
int start(void) { pthread_t t; return pthread_create(&t, 0, run, 0); }
C
gcc -shared -fPIC -O1 -o libneeds_glibc_2_34.so needs_glibc_2_34.c
rm needs_glibc_2_34.c
