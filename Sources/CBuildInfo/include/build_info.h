#ifndef CHAINWATCH_BUILD_INFO_H
#define CHAINWATCH_BUILD_INFO_H

/// The git commit the binary was built from (`make build` passes it as CHAINWATCH_COMMIT; Package.swift turns it into
/// a define of this target only), or "" for a build from a tree without git or with plain `swift build`.
const char *c_chainwatch_commit(void);

#endif
