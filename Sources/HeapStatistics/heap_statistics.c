// Live-heap size for the benchmark (Swift cannot see malloc.h through Glibc).
#include "HeapStatistics.h"
#include <stdlib.h> // defines __GLIBC__ on glibc systems

#if defined(__GLIBC__)
#include <malloc.h>
size_t heap_statistics_live_bytes(void) {
    struct mallinfo2 info = mallinfo2();
    return info.uordblks + info.hblkhd;
}
#elif defined(__APPLE__)
#include <malloc/malloc.h>
size_t heap_statistics_live_bytes(void) {
    malloc_statistics_t stats;
    malloc_zone_statistics(NULL, &stats);
    return stats.size_in_use;
}
#else
size_t heap_statistics_live_bytes(void) { return 0; }
#endif
