#ifndef CHAINWATCH_CBROTLI_SHIM_H
#define CHAINWATCH_CBROTLI_SHIM_H
#include <brotli/decode.h>
#endif
