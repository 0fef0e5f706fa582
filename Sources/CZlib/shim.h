#ifndef CHAINWATCH_CZLIB_SHIM_H
#define CHAINWATCH_CZLIB_SHIM_H
#include <zlib.h>

// Macros do not import into Swift: inflateInit is a macro over inflateInit_.
static inline int c_zlib_inflateInit(z_stream *stream) { return inflateInit(stream); }
#endif
