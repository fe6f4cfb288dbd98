#ifndef HEAP_STATISTICS_H
#define HEAP_STATISTICS_H

#include <stddef.h>

/// Bytes currently allocated by malloc (live heap), or 0 where the platform cannot tell.
size_t heap_statistics_live_bytes(void);

#endif
