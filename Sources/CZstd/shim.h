#ifndef CHAINWATCH_CZSTD_SHIM_H
#define CHAINWATCH_CZSTD_SHIM_H
#include <zstd.h>
#endif
