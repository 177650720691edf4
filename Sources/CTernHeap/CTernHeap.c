// The functions are in the header (static inline); a C target needs one source file.
#include "CTernHeap.h"
