// What `tern serve` asks of the C library's allocator (glibc's malloc; elsewhere these do nothing).
#ifndef CTERNHEAP_H
#define CTERNHEAP_H

#include <stdlib.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

/// Bytes the allocator holds free (in its arenas, not given back to the system); 0 where it cannot tell.
static inline size_t tern_heap_free_bytes(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 info = mallinfo2();
    return info.fordblks;
#else
    return 0;
#endif
}

/// Gives the free pages of every arena back to the system. Returns 1 if memory was released.
static inline int tern_heap_trim(void) {
#if defined(__GLIBC__)
    return malloc_trim(0);
#else
    return 0;
#endif
}

#endif
