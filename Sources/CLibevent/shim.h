#ifndef CHAINWATCH_CLIBEVENT_SHIM_H
#define CHAINWATCH_CLIBEVENT_SHIM_H
// libc headers first: event2/event-config.h defines _GNU_SOURCE, and clang refuses
// to merge fd_set across modules if these come after it.
#include <sys/types.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/resource.h>
#include <sys/eventfd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <fcntl.h>
#include <unistd.h>
#include <errno.h>
#include <signal.h>

#include <event2/event.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/listener.h>
#include <event2/dns.h>
#include <event2/util.h>
#include <event2/thread.h>

/// `evutil_socket_t` is a macro-free typedef, but EV_* flag combinations are not importable as one value.
static const short c_libevent_EV_READ_WRITE = EV_READ | EV_WRITE;
static const short c_libevent_BEV_EVENT_EOF = BEV_EVENT_EOF;

#endif
