/*
 * floor-relay: the cheapest correct HTTP CONNECT relay we could write, as the "floor" of bench/compare.sh: the least
 * CPU any CONNECT relay spends per connection and per byte on this kernel. It does nothing a real proxy does beyond
 * that: no policy, no inspection, no logging, no DNS (numeric addresses only), no limits but its buffers.
 *
 *   floor-relay PORT          listens on 127.0.0.1:PORT, one thread, epoll, edge-triggered
 *
 * Per connection: read the request head (at most 8 KiB) up to CRLF CRLF; `CONNECT a.b.c.d:port HTTP/1.x` gets a
 * non-blocking connect and then `200`, anything else a 400 (502 when the connect fails). Bytes after the head go
 * upstream first. Then bytes are copied both ways through a 64 KiB buffer per direction, with back-pressure (no read
 * while that direction's buffer is unsent) and half-close (EOF one way is a shutdown(SHUT_WR) the other way, once the
 * buffer is out); the pair is closed when both directions are done or on an error.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

enum { HEAD_MAX = 8192, BUF = 65536 };

struct conn {
    int client, upstream;
    int state;                /* 0 reading head, 1 connecting, 2 relaying */
    char *head;               /* while reading the head only */
    size_t head_len;
    struct dir { char *buf; size_t off, len; int eof, shut; } up, down;   /* up: client -> upstream; buf: unsent bytes only */
    struct side { struct conn *c; int is_client; } cs, us;
    int closed;
};

static int ep;

static void add(int fd, struct side *s) {
    struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.ptr = s };
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}

/* Closes both sockets now and frees the connection after the current epoll batch, which may still name it (at most
   one entry per socket, 256 entries per batch). */
static struct conn *graveyard[256];
static int graves;

static void bury(struct conn *c) {
    if (c->closed) return;
    c->closed = 1;
    close(c->client);
    if (c->upstream >= 0) close(c->upstream);
    free(c->head);
    free(c->up.buf);
    free(c->down.buf);
    graveyard[graves++] = c;
}

static void reply(struct conn *c, const char *text) {
    ssize_t n = write(c->client, text, strlen(text));
    (void)n;
}

static char scratch[BUF];   /* one thread: every read lands here first */

/* Writes `len` bytes at `p` to `to`; what the socket does not take is kept in `d` (allocated only then, so an idle
   tunnel holds no buffer). Returns 1 when all went, 0 when some is kept, -1 on an error. */
static int send_or_keep(struct dir *d, int to, const char *p, size_t len) {
    while (len > 0) {
        ssize_t n = write(to, p, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno != EAGAIN) return -1;
            if (!d->buf) { d->buf = malloc(BUF); if (!d->buf) return -1; memcpy(d->buf, p, len); d->off = 0; d->len = len; }
            else { d->off = (size_t)(p - d->buf); }
            return 0;
        }
        p += n; len -= (size_t)n;
    }
    free(d->buf);
    d->buf = NULL;
    d->off = d->len = 0;
    return 1;
}

/* Sends what `d` keeps to `to`; then reads from `from` and sends, while both sockets allow (back-pressure: nothing is
   read while bytes are kept). At EOF, shuts `to` for writing once everything is out. Returns -1 on an error. */
static int pump(struct dir *d, int from, int to) {
    if (d->buf) {
        int r = send_or_keep(d, to, d->buf + d->off, d->len - d->off);
        if (r <= 0) return r;
    }
    for (;;) {
        if (d->eof) {
            if (!d->shut) { shutdown(to, SHUT_WR); d->shut = 1; }
            return 0;
        }
        ssize_t n = read(from, scratch, BUF);
        if (n == 0) { d->eof = 1; continue; }
        if (n < 0) return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
        int r = send_or_keep(d, to, scratch, (size_t)n);
        if (r <= 0) return r;
    }
}

/* An event on one socket: readable (or closed, or failed) moves its outgoing direction; writable moves the direction
   that writes to it, which also reads its other socket again (edge-triggered: reading stopped there when the bytes
   had to be kept). That read is tried on every writable event, also when nothing was kept: one read(2) returning
   EAGAIN more than needed, so the floor's CPU figures are slightly high, not low. */
static void relay(struct conn *c, int is_client, uint32_t events) {
    int readable = events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR), writable = events & (EPOLLOUT | EPOLLERR);
    struct dir *out = is_client ? &c->up : &c->down, *in = is_client ? &c->down : &c->up;
    int self = is_client ? c->client : c->upstream, peer = is_client ? c->upstream : c->client;
    if ((readable && pump(out, self, peer) < 0) || (writable && pump(in, peer, self) < 0)) return bury(c);
    if (c->up.shut && c->down.shut) bury(c);
}

static void read_head(struct conn *c) {
    for (;;) {
        if (c->head_len == HEAD_MAX) { reply(c, "HTTP/1.1 400 Bad Request\r\n\r\n"); return bury(c); }
        ssize_t n = read(c->client, c->head + c->head_len, HEAD_MAX - c->head_len);
        if (n == 0) return bury(c);
        if (n < 0) { if (errno == EAGAIN || errno == EINTR) return; return bury(c); }
        c->head_len += (size_t)n;
        char *end = memmem(c->head, c->head_len, "\r\n\r\n", 4);
        if (!end) continue;
        size_t rest = c->head_len - (size_t)(end + 4 - c->head);
        *end = '\0';   /* sscanf reads the request line and headers as one string */
        char host[64]; unsigned port = 0; int used = 0;
        if (sscanf(c->head, "CONNECT %63[0-9.]:%u HTTP/1.%*1[01]%n", host, &port, &used) < 2 || used == 0 ||
            port == 0 || port > 65535) {
            reply(c, "HTTP/1.1 400 Bad Request\r\n\r\n");
            return bury(c);
        }
        struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
        if (inet_pton(AF_INET, host, &sin.sin_addr) != 1) { reply(c, "HTTP/1.1 400 Bad Request\r\n\r\n"); return bury(c); }
        /* Bytes after the head (a client that sends its ClientHello at once) go upstream first. */
        if (rest > 0) {
            if (!(c->up.buf = malloc(BUF))) return bury(c);
            memcpy(c->up.buf, end + 4, rest);
            c->up.len = rest;
        }
        free(c->head);
        c->head = NULL;
        c->upstream = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        int one = 1;
        setsockopt(c->upstream, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(c->upstream, (struct sockaddr *)&sin, sizeof sin) < 0 && errno != EINPROGRESS) {
            reply(c, "HTTP/1.1 502 Bad Gateway\r\n\r\n");
            return bury(c);
        }
        c->state = 1;
        add(c->upstream, &c->us);
        return;
    }
}

static void connected(struct conn *c) {
    int err = 0; socklen_t len = sizeof err;
    getsockopt(c->upstream, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err == EINPROGRESS || err == EALREADY) return;
    if (err) { reply(c, "HTTP/1.1 502 Bad Gateway\r\n\r\n"); return bury(c); }
    const char *ok = "HTTP/1.1 200 Connection established\r\n\r\n";
    if (write(c->client, ok, strlen(ok)) != (ssize_t)strlen(ok)) return bury(c);
    c->state = 2;
    relay(c, 1, EPOLLIN);    /* the bytes after the head, and what the client sent while connecting */
    if (!c->closed) relay(c, 0, EPOLLIN);
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s PORT\n", argv[0]); return 2; }
    signal(SIGPIPE, SIG_IGN);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])) };
    inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
    if (bind(lfd, (struct sockaddr *)&sin, sizeof sin) < 0 || listen(lfd, 4096) < 0) { perror("floor-relay: listen"); return 1; }
    ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event lev = { .events = EPOLLIN, .data.ptr = NULL };
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &lev);
    struct epoll_event events[256];
    for (;;) {
        int n = epoll_wait(ep, events, 256, -1);
        if (n < 0) { if (errno == EINTR) continue; perror("floor-relay: epoll_wait"); return 1; }
        for (int i = 0; i < n; i++) {
            struct side *s = events[i].data.ptr;
            if (!s) {
                int fd;
                while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    struct conn *c = calloc(1, sizeof *c);
                    if (!c) { close(fd); continue; }
                    c->client = fd; c->upstream = -1;
                    if (!(c->head = malloc(HEAD_MAX))) { close(fd); free(c); continue; }
                    c->cs = (struct side){ c, 1 };
                    c->us = (struct side){ c, 0 };
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    add(fd, &c->cs);
                }
                continue;
            }
            struct conn *c = s->c;
            if (c->closed) continue;
            if (c->state == 0) { if (s->is_client) read_head(c); }
            else if (c->state == 1) { if (!s->is_client) connected(c); }
            else relay(c, s->is_client, events[i].events);
        }
        for (int i = 0; i < graves; i++) free(graveyard[i]);
        graves = 0;
    }
}
