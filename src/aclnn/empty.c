/*
 * empty.c - the source of the empty libraries of the CANN-shaped install
 * (libc_sec.so, libhccl.so): builds written for CANN link them by name,
 * and the host runtime needs nothing from them (docs/aclnn-host.md).  ISO
 * C wants a translation unit to declare something.
 */
typedef int moeperm_cann_empty_library;
