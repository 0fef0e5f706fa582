#include "build_info.h"

#ifndef CHAINWATCH_COMMIT
#define CHAINWATCH_COMMIT ""
#endif

const char *c_chainwatch_commit(void) { return CHAINWATCH_COMMIT; }
