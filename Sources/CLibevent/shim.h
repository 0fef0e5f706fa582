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
#include <sys/timerfd.h>
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
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

/// `evutil_socket_t` is a macro-free typedef, but EV_* flag combinations are not importable as one value.
static const short c_libevent_EV_READ_WRITE = EV_READ | EV_WRITE;
static const short c_libevent_BEV_EVENT_EOF = BEV_EVENT_EOF;

/// `accept4` is declared only under _GNU_SOURCE, which the Swift Glibc module is not built with.
int accept4(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags);
static inline int c_libevent_accept4(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags) {
    return accept4(fd, addr, addrlen, flags);
}

/// splice(2) and pipe2(2), likewise _GNU_SOURCE only: a tunnel's bulk bytes go socket → pipe → socket in the kernel.
ssize_t splice(int fd_in, __loff_t *off_in, int fd_out, __loff_t *off_out, size_t len, unsigned int flags);
int pipe2(int pipefd[2], int flags);
static inline ssize_t c_libevent_splice(int fd_in, int fd_out, size_t len, unsigned int flags) {
    return splice(fd_in, NULL, fd_out, NULL, len, flags);
}
static inline int c_libevent_pipe2(int pipefd[2], int flags) { return pipe2(pipefd, flags); }
static const unsigned int c_libevent_SPLICE_F_MOVE = 1;
static const unsigned int c_libevent_SPLICE_F_NONBLOCK = 2;
static const int c_libevent_F_SETPIPE_SZ = 1031;
static const int c_libevent_F_GETPIPE_SZ = 1032;

/// The CPUs this process may run on (sched_getaffinity(2), _GNU_SOURCE only): under `taskset` or a cpuset
/// container that is fewer than the machine's cores. 0 when the call fails.
int sched_getaffinity(pid_t pid, size_t cpusetsize, void *mask);
static inline int c_libevent_sched_getaffinity_count(void) {
    unsigned long mask[16] = {0};   /* 1 024 CPUs */
    if (sched_getaffinity(0, sizeof mask, mask) != 0) return 0;
    int n = 0;
    for (int i = 0; i < 16; i++) n += __builtin_popcountl(mask[i]);
    return n;
}

#endif
