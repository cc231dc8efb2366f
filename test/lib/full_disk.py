"""An LD_PRELOAD shim that fails every write and fsync to a file whose path
holds $CLEAVE_FULL_DISK with ENOSPC: a full disk, for one file.

    shim = full_disk.build(workdir)
    env = dict(os.environ, LD_PRELOAD=shim, CLEAVE_FULL_DISK="metrics.json")
"""
import subprocess

# Fails every write and fsync to a file whose path holds $CLEAVE_FULL_DISK.
SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char full[1024];

static int track(int fd, const char *path) {
  const char *match = getenv("CLEAVE_FULL_DISK");
  if (fd >= 0 && fd < 1024)
    full[fd] = match && *match && strstr(path, match) != NULL;
  return fd;
}

#define OPEN(name, ...)                                                        \
  int name(__VA_ARGS__, int flags, ...) {                                       \
    va_list args;                                                              \
    va_start(args, flags);                                                     \
    mode_t mode = (mode_t)va_arg(args, int);                                   \
    va_end(args);
OPEN(open, const char *path)
  static int (*real)(const char *, int, ...);
  if (!real) real = dlsym(RTLD_NEXT, "open");
  return track(real(path, flags, mode), path);
}
OPEN(open64, const char *path)
  static int (*real)(const char *, int, ...);
  if (!real) real = dlsym(RTLD_NEXT, "open64");
  return track(real(path, flags, mode), path);
}
OPEN(openat, int dir, const char *path)
  static int (*real)(int, const char *, int, ...);
  if (!real) real = dlsym(RTLD_NEXT, "openat");
  return track(real(dir, path, flags, mode), path);
}
OPEN(openat64, int dir, const char *path)
  static int (*real)(int, const char *, int, ...);
  if (!real) real = dlsym(RTLD_NEXT, "openat64");
  return track(real(dir, path, flags, mode), path);
}

ssize_t write(int fd, const void *data, size_t size) {
  static ssize_t (*real)(int, const void *, size_t);
  if (!real) real = dlsym(RTLD_NEXT, "write");
  if (fd >= 0 && fd < 1024 && full[fd]) { errno = ENOSPC; return -1; }
  return real(fd, data, size);
}

int fsync(int fd) {
  static int (*real)(int);
  if (!real) real = dlsym(RTLD_NEXT, "fsync");
  if (fd >= 0 && fd < 1024 && full[fd]) { errno = ENOSPC; return -1; }
  return real(fd);
}
"""


def build(work):
    """Compiles the shim into `work`; returns the shared library's path."""
    shim = f"{work}/full_disk.so"
    with open(f"{work}/full_disk.c", "w") as f:
        f.write(SHIM)
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", shim, f"{work}/full_disk.c", "-ldl"],
                   check=True)
    return shim
