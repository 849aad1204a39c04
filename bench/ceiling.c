// The machine's ceiling for bench/ab2009.sh's phpcached row: the least a server can do per
// keep-alive request for one fixed response (a cached page's head and body, read from a
// file), with no HTTP parsing beyond finding each request's end, one thread, epoll
// (edge-triggered). What a caching proxy's hit can approach, never beat, on this kernel and
// loopback: the receiver's TCP processing on loopback is charged to the sender either way.
//
//   cc -O2 -o ceiling bench/ceiling.c && ./ceiling MODE PORT RESPONSE_FILE
//
// MODE, the send of one response:
//   writev    one writev(2) of the response (the kernel copies the body into the socket)
//   splice    the head written into a pipe, the body vmspliced into it by reference, the
//             pipe spliced to the socket: 3 system calls (what Shellac does, src/server/h1/
//             splice.rs)
//   splice1   head and body in one mapping, both vmspliced at once, then spliced: 2 calls
//   sendfile  the head sent with MSG_MORE, the body sendfile(2)d from a memfd: 2 calls
//   splice2   what Shellac does for a stored body (src/cache/pages.rs): the head in a mapping
//             of its own (Shellac's per-thread arena), the body in another (its stored
//             mapping), both vmspliced in one call of two iovecs, then spliced: 2 calls.
//             HEADOFF=N in the environment puts the head N bytes into its mapping:
//             HEADOFF=3950 splits a ~300-byte head over two pages (two pipe buffers), as
//             Shellac's arena did for ~7% of heads before the twelfth stop
//   tee       the body vmspliced once, at start, into a pipe of its own; per response the head
//             vmspliced into the connection's pipe, the body's page references tee(2)d in
//             after it, the pipe spliced: 3 calls, but no page-table walk of the body per
//             response (what Shellac does for a hot body, src/cache/pages/held.rs)
// Environment, for experiments on what a server's own work does to the kernel's share
// (bench/RESULTS.md, "thirteenth stop: kernel"): SPIN=N runs an empty loop of N iterations
// after each response (CPU time without memory); TOUCH=K writes one byte in each 64-byte
// line of K KiB after each response, going round a ring of RING KiB (default 4096): a
// server's memory traffic, L1-sized or L2-sized.
// Prints "cpu SECONDS" (user + system) on SIGTERM or SIGINT.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

enum { WRITEV, SPLICE, SPLICE1, SENDFILE, TEE, SPLICE2 };
static int bodypipe[2];   // tee: the body's pages, never read out
static int mode;
static char *resp;        // head + body, in a mapping never written after start
static char *head2, *body2; // splice2: the head and the body in mappings of their own
static size_t rlen, hlen; // the whole response, its head
static int memfd;         // the body, for sendfile
static size_t touch_kib, ring_kib, spin_n, ring_at; // SPIN, TOUCH, RING (above)
static char *ring;

// A server's own work after a response, as SPIN and TOUCH ask (nothing by default).
static void per_request(void) {
  for (size_t i = 0; i < touch_kib * 1024; i += 64) {
    ring[ring_at] += 1;
    ring_at += 64;
    if (ring_at >= ring_kib * 1024) ring_at = 0;
  }
  for (volatile size_t i = 0; i < spin_n; i++) {
  }
}

struct conn {
  int fd, p[2];
  size_t off;     // bytes of the current response put on their way
  size_t inpipe;  // bytes in the pipe not yet spliced
  unsigned queued; // complete requests not yet answered (pipelining)
  int tail;       // how many bytes of "\r\n\r\n" the last read ended with
};

static void done(int sig) {
  (void)sig;
  struct rusage r;
  getrusage(RUSAGE_SELF, &r);
  fprintf(stderr, "cpu %.3f\n", r.ru_utime.tv_sec + r.ru_stime.tv_sec +
                                    (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6);
  _exit(0);
}

// Sends the current response on; 1 when it is all on its way, 0 when the socket is full, -1
// on an error.
static int send_one(struct conn *c) {
  for (;;) {
    if (c->inpipe) {
      ssize_t n = splice(c->p[0], NULL, c->fd, NULL, c->inpipe, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
      if (n < 0) return errno == EAGAIN ? 0 : -1;
      c->inpipe -= n;
      continue;
    }
    if (c->off == rlen) return 1;
    ssize_t n;
    if (mode == WRITEV) {
      struct iovec v = {resp + c->off, rlen - c->off};
      n = writev(c->fd, &v, 1);
      if (n < 0) return errno == EAGAIN ? 0 : -1;
      c->off += n;
    } else if (mode == SENDFILE) {
      if (c->off < hlen) {
        n = send(c->fd, resp + c->off, hlen - c->off, MSG_MORE);
      } else {
        off_t at = c->off - hlen;
        n = sendfile(c->fd, memfd, &at, rlen - c->off);
      }
      if (n < 0) return errno == EAGAIN ? 0 : -1;
      c->off += n;
    } else if (mode == TEE) {
      if (c->off < hlen) {
        struct iovec v = {resp + c->off, hlen - c->off};
        n = vmsplice(c->p[1], &v, 1, SPLICE_F_NONBLOCK);
        if (n < 0) return errno == EAGAIN ? 0 : -1;
        c->off += n; c->inpipe += n;
        if (c->off < hlen) continue;
      }
      n = tee(bodypipe[0], c->p[1], rlen - hlen, SPLICE_F_NONBLOCK);
      if (n < 0) return errno == EAGAIN ? 0 : -1;
      if (n != (ssize_t)(rlen - hlen)) return -1;
      c->off += n; c->inpipe += n;
    } else if (mode == SPLICE2) {
      struct iovec v[2];
      int k = 0;
      if (c->off < hlen) v[k++] = (struct iovec){head2 + c->off, hlen - c->off};
      size_t b = c->off < hlen ? 0 : c->off - hlen;
      v[k++] = (struct iovec){body2 + b, rlen - hlen - b};
      n = vmsplice(c->p[1], v, k, SPLICE_F_NONBLOCK);
      if (n < 0 && errno != EAGAIN) return -1;
      if (n > 0) {
        c->off += n;
        c->inpipe += n;
      }
    } else {
      if (mode == SPLICE && c->off < hlen) {
        n = write(c->p[1], resp + c->off, hlen - c->off);
        if (n < 0) return errno == EAGAIN ? 0 : -1;
        c->off += n;
        c->inpipe += n;
      }
      struct iovec v = {resp + c->off, rlen - c->off};
      n = vmsplice(c->p[1], &v, 1, SPLICE_F_NONBLOCK);
      if (n < 0 && errno != EAGAIN) return -1;
      if (n > 0) {
        c->off += n;
        c->inpipe += n;
      }
    }
  }
}

// Answers every queued request the socket takes now.
static int pump(struct conn *c) {
  while (c->queued) {
    int r = send_one(c);
    if (r <= 0) return r;
    c->queued--;
    c->off = 0;
    per_request();
  }
  return 1;
}

static void close_conn(struct conn *c) {
  close(c->fd);
  if (c->p[0] >= 0) {
    close(c->p[0]);
    close(c->p[1]);
  }
  free(c);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: ceiling writev|splice|splice1|sendfile|tee|splice2 PORT RESPONSE_FILE\n");
    return 2;
  }
  const char *modes[] = {"writev", "splice", "splice1", "sendfile", "tee", "splice2"};
  mode = -1;
  for (int i = 0; i < 6; i++)
    if (!strcmp(argv[1], modes[i])) mode = i;
  if (mode < 0) return 2;
  signal(SIGTERM, done);
  signal(SIGINT, done);
  signal(SIGPIPE, SIG_IGN);

  int f = open(argv[3], O_RDONLY);
  struct stat st;
  if (f < 0 || fstat(f, &st) != 0) return perror("response"), 1;
  rlen = st.st_size;
  resp = mmap(NULL, rlen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (resp == MAP_FAILED || read(f, resp, rlen) != (ssize_t)rlen) return perror("read"), 1;
  close(f);
  char *end = memmem(resp, rlen, "\r\n\r\n", 4);
  if (!end) return fprintf(stderr, "no head in %s\n", argv[3]), 1;
  hlen = end + 4 - resp;
  memfd = memfd_create("body", 0);
  if (write(memfd, resp + hlen, rlen - hlen) != (ssize_t)(rlen - hlen)) return perror("memfd"), 1;

  spin_n = getenv("SPIN") ? strtoul(getenv("SPIN"), NULL, 10) : 0;
  touch_kib = getenv("TOUCH") ? strtoul(getenv("TOUCH"), NULL, 10) : 0;
  ring_kib = getenv("RING") ? strtoul(getenv("RING"), NULL, 10) : 4096;
  if (touch_kib && !(ring = calloc(ring_kib ? ring_kib : 1, 1024))) return perror("RING"), 1;
  if (mode == SPLICE2) {
    size_t headoff = getenv("HEADOFF") ? strtoul(getenv("HEADOFF"), NULL, 10) : 0;
    head2 = mmap(NULL, headoff + hlen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    body2 = mmap(NULL, rlen - hlen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (head2 == MAP_FAILED || body2 == MAP_FAILED) return perror("mmap"), 1;
    head2 += headoff;
    memcpy(head2, resp, hlen);
    memcpy(body2, resp + hlen, rlen - hlen);
  }
  if (mode == TEE) {
    pipe2(bodypipe, O_NONBLOCK);
    fcntl(bodypipe[1], F_SETPIPE_SZ, 256 * 1024);
    struct iovec v = {resp + hlen, rlen - hlen};
    if (vmsplice(bodypipe[1], &v, 1, 0) != (ssize_t)(rlen - hlen)) return perror("bodypipe"), 1;
  }
  int one = 1, l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2])),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (bind(l, (void *)&a, sizeof a) || listen(l, 511)) return perror("listen"), 1;
  int ep = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
  epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev);
  struct epoll_event evs[64];
  static char buf[16384];
  for (;;) {
    int n = epoll_wait(ep, evs, 64, -1);
    for (int i = 0; i < n; i++) {
      struct conn *c = evs[i].data.ptr;
      if (!c) {
        int fd;
        while ((fd = accept4(l, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          c = calloc(1, sizeof *c);
          c->fd = fd;
          c->p[0] = c->p[1] = -1;
          if (mode == SPLICE || mode == SPLICE1 || mode == TEE || mode == SPLICE2) {
            pipe2(c->p, O_NONBLOCK);
            fcntl(c->p[1], F_SETPIPE_SZ, 256 * 1024);
          }
          struct epoll_event e = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = c};
          epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
        }
        continue;
      }
      int r = pump(c);
      if (r < 0) {
        close_conn(c);
        continue;
      }
      if (r == 0) continue; // the socket is full: on with it at EPOLLOUT
      for (;;) {
        ssize_t got = read(c->fd, buf, sizeof buf);
        if (got == 0 || (got < 0 && errno != EAGAIN)) {
          close_conn(c);
          break;
        }
        if (got < 0) break;
        // Each "\r\n\r\n" ends a request (bodiless GETs), also across reads.
        for (ssize_t k = 0; k < got; k++) {
          const char want = "\r\n\r\n"[c->tail];
          if (buf[k] == want) {
            if (++c->tail == 4) {
              c->queued++;
              c->tail = 0;
            }
          } else {
            c->tail = buf[k] == '\r' ? 1 : 0;
          }
        }
        r = pump(c);
        if (r < 0) {
          close_conn(c);
          break;
        }
        if (r == 0) break;
      }
    }
  }
}
