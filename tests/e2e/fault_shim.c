/* fault_shim: an LD_PRELOAD library that fails the Nth call of one kind, as SQLite's fault tests
 * fail every allocation in turn (test_fault_inject.c drives it). Set in the environment:
 *   PL_FAULT_KIND  malloc (malloc, calloc, realloc), open (open, openat, fopen), write (write,
 *                  pwrite), fsync (fsync, fdatasync) or rename (rename, renameat)
 *   PL_FAULT_N     which call of that kind fails (1 = the first); the others succeed
 *   PL_FAULT_ERRNO the errno it fails with (a number; ENOMEM for malloc, by default EIO)
 *   PL_FAULT_PATH  open, rename: only paths containing this count; write, fsync: only file
 *                  descriptors opened (by open/openat) on such a path
 *   PL_FAULT_ARM   malloc: counting starts at the first open/fopen of a path containing this (the
 *                  pipeline file), past the dynamic loader's and the libraries' start-up
 *   PL_FAULT_LOG   a file the shim appends "KIND N\n" to when it fails a call, and "calls C\n" at
 *                  exit: how many calls of the kind it counted
 * glibc's __libc_malloc family backs the allocator wrappers (dlsym itself allocates). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);

enum { K_NONE, K_MALLOC, K_OPEN, K_WRITE, K_FSYNC, K_RENAME };
enum { MAX_FD = 4096 };

static int kind = K_NONE, fail_errno = EIO;
static long target;
static long count;
static const char *match, *arm_on, *log_path;
static bool armed;
static unsigned char tracked[MAX_FD]; /* fds opened on a matching path */

static int (*real_open)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static FILE *(*real_fopen)(const char *, const char *);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_rename)(const char *, const char *);
static int (*real_renameat)(int, const char *, int, const char *);

__attribute__((constructor)) static void fault_init(void)
{
    real_open = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
    real_openat = (int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT, "openat");
    real_fopen = (FILE * (*)(const char *, const char *)) dlsym(RTLD_NEXT, "fopen");
    real_write = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    real_pwrite = (ssize_t(*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
    real_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    real_rename = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
    real_renameat = (int (*)(int, const char *, int, const char *))dlsym(RTLD_NEXT, "renameat");
    const char *k = getenv("PL_FAULT_KIND"), *n = getenv("PL_FAULT_N"),
               *e = getenv("PL_FAULT_ERRNO");
    static const char *const names[] = {"", "malloc", "open", "write", "fsync", "rename"};
    for (int i = 1; k && i <= K_RENAME; i++)
        if (strcmp(k, names[i]) == 0) kind = i;
    target = n ? atol(n) : 0;
    fail_errno = e ? atoi(e) : kind == K_MALLOC ? ENOMEM : EIO;
    match = getenv("PL_FAULT_PATH");
    arm_on = getenv("PL_FAULT_ARM");
    log_path = getenv("PL_FAULT_LOG");
    armed = kind != K_MALLOC || !arm_on;
}

/* Appends a line to PL_FAULT_LOG with raw syscalls: no allocation, no recursion into the
 * wrappers. */
static void fault_log(const char *what, long n)
{
    if (!log_path) return;
    int fd = (int)syscall(SYS_openat, AT_FDCWD, log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) return;
    char line[64];
    int len = snprintf(line, sizeof line, "%s %ld\n", what, n);
    if (len > 0) syscall(SYS_write, fd, line, (size_t)len);
    syscall(SYS_close, fd);
}

__attribute__((destructor)) static void fault_fini(void)
{
    fault_log("calls", __atomic_load_n(&count, __ATOMIC_ACQUIRE));
}

/* Whether this call of kind k is the one to fail (and records it). */
static bool fault_hit(int k)
{
    static const char *const names[] = {"", "malloc", "open", "write", "fsync", "rename"};
    if (k != kind || !__atomic_load_n(&armed, __ATOMIC_ACQUIRE)) return false;
    if (__atomic_add_fetch(&count, 1, __ATOMIC_ACQ_REL) != target) return false;
    fault_log(names[k], target);
    return true;
}

static bool path_matches(const char *p)
{
    return p && match && strstr(p, match);
}

static void maybe_arm(const char *p)
{
    if (arm_on && p && strstr(p, arm_on)) __atomic_store_n(&armed, true, __ATOMIC_RELEASE);
}

static bool fd_tracked(int fd)
{
    return fd >= 0 && fd < MAX_FD && tracked[fd];
}

static int after_open(const char *p, int fd)
{
    if (fd >= 0 && fd < MAX_FD) __atomic_store_n(&tracked[fd], path_matches(p), __ATOMIC_RELEASE);
    return fd;
}

void *malloc(size_t n)
{
    if (fault_hit(K_MALLOC)) {
        errno = fail_errno;
        return NULL;
    }
    return __libc_malloc(n);
}

void *calloc(size_t a, size_t b)
{
    if (fault_hit(K_MALLOC)) {
        errno = fail_errno;
        return NULL;
    }
    return __libc_calloc(a, b);
}

void *realloc(void *p, size_t n)
{
    if (n && fault_hit(K_MALLOC)) {
        errno = fail_errno;
        return NULL;
    }
    return __libc_realloc(p, n);
}

static int open_common(int dirfd, bool at, const char *p, int flags, mode_t mode)
{
    maybe_arm(p);
    if (path_matches(p) && fault_hit(K_OPEN)) {
        errno = fail_errno;
        return -1;
    }
    int fd = at ? real_openat(dirfd, p, flags, mode) : real_open(p, flags, mode);
    return after_open(p, fd);
}

static mode_t mode_arg(int flags, va_list ap)
{
    return (flags & O_CREAT) || (flags & __O_TMPFILE) == __O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

int open(const char *p, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t m = mode_arg(flags, ap);
    va_end(ap);
    return open_common(AT_FDCWD, false, p, flags, m);
}

int open64(const char *p, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t m = mode_arg(flags, ap);
    va_end(ap);
    return open_common(AT_FDCWD, false, p, flags, m);
}

int openat(int dirfd, const char *p, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t m = mode_arg(flags, ap);
    va_end(ap);
    return open_common(dirfd, true, p, flags, m);
}

int openat64(int dirfd, const char *p, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t m = mode_arg(flags, ap);
    va_end(ap);
    return open_common(dirfd, true, p, flags, m);
}

FILE *fopen(const char *p, const char *mode)
{
    maybe_arm(p);
    if (path_matches(p) && fault_hit(K_OPEN)) {
        errno = fail_errno;
        return NULL;
    }
    return real_fopen(p, mode);
}

FILE *fopen64(const char *p, const char *mode)
{
    return fopen(p, mode);
}

int close(int fd)
{
    if (fd >= 0 && fd < MAX_FD) __atomic_store_n(&tracked[fd], 0, __ATOMIC_RELEASE);
    return (int)syscall(SYS_close, fd);
}

ssize_t write(int fd, const void *b, size_t n)
{
    if (fd_tracked(fd) && fault_hit(K_WRITE)) {
        errno = fail_errno;
        return -1;
    }
    return real_write(fd, b, n);
}

ssize_t pwrite(int fd, const void *b, size_t n, off_t at)
{
    if (fd_tracked(fd) && fault_hit(K_WRITE)) {
        errno = fail_errno;
        return -1;
    }
    return real_pwrite(fd, b, n, at);
}

ssize_t pwrite64(int fd, const void *b, size_t n, off_t at)
{
    return pwrite(fd, b, n, at);
}

int fsync(int fd)
{
    if (fd_tracked(fd) && fault_hit(K_FSYNC)) {
        errno = fail_errno;
        return -1;
    }
    return real_fsync(fd);
}

int fdatasync(int fd)
{
    if (fd_tracked(fd) && fault_hit(K_FSYNC)) {
        errno = fail_errno;
        return -1;
    }
    return real_fdatasync(fd);
}

int rename(const char *a, const char *b)
{
    if (path_matches(a) && fault_hit(K_RENAME)) {
        errno = fail_errno;
        return -1;
    }
    return real_rename(a, b);
}

int renameat(int da, const char *a, int db, const char *b)
{
    if (path_matches(a) && fault_hit(K_RENAME)) {
        errno = fail_errno;
        return -1;
    }
    return real_renameat(da, a, db, b);
}
