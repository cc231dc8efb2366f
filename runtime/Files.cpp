//===- Files.cpp - files written whole or not at all ---------------------===//

#include "runtime/Files.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cleave::rt {
namespace {

std::string systemError(const char *what) {
  return std::string(what) + ": " + std::strerror(errno);
}

/// Writes all of `bytes` to `fd`, going on after short writes and EINTR.
bool writeAll(int fd, const char *bytes, std::size_t size) {
  while (size > 0) {
    ssize_t written = ::write(fd, bytes, size);
    if (written < 0 && errno == EINTR)
      continue;
    if (written <= 0)
      return false;
    bytes += written;
    size -= static_cast<std::size_t>(written);
  }
  return true;
}

/// Holds off the stop signals for its scope.
class StopSignalsHeld {
public:
  StopSignalsHeld() {
    sigset_t stops;
    sigemptyset(&stops);
    for (int sig : {SIGTERM, SIGINT, SIGHUP})
      sigaddset(&stops, sig);
    pthread_sigmask(SIG_BLOCK, &stops, &saved);
  }
  ~StopSignalsHeld() { pthread_sigmask(SIG_SETMASK, &saved, nullptr); }
  StopSignalsHeld(const StopSignalsHeld &) = delete;
  StopSignalsHeld &operator=(const StopSignalsHeld &) = delete;

private:
  sigset_t saved;
};

} // namespace

FileSet::~FileSet() {
  for (const std::string &path : staged)
    std::remove(FileSet::stagedName(path).c_str());
}

bool FileSet::stage(const std::string &path, const std::vector<FileChunk> &chunks,
                    std::string &error) {
  const std::string temporary = FileSet::stagedName(path);
  int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    error = systemError("cannot write");
    return false;
  }
  bool written = true;
  for (const auto &[data, bytes] : chunks)
    written = written && writeAll(fd, static_cast<const char *>(data), bytes);
  // A full disk may only show at fsync or close.
  written = written && ::fsync(fd) == 0;
  if (!written)
    error = systemError("cannot write");
  if (::close(fd) != 0 && written) {
    error = systemError("cannot write");
    written = false;
  }
  if (!written) {
    std::remove(temporary.c_str());
    return false;
  }
  staged.push_back(path);
  return true;
}

bool FileSet::adopt(const std::string &path, std::string &error) {
  if (::access(stagedName(path).c_str(), F_OK) != 0) {
    error = "was not written (no " + stagedName(path) + ")";
    return false;
  }
  staged.push_back(path);
  return true;
}

bool FileSet::commit(std::string &failed, std::string &error) {
  StopSignalsHeld held;
  for (size_t i = 0; i < staged.size(); ++i) {
    if (std::rename(FileSet::stagedName(staged[i]).c_str(), staged[i].c_str()) != 0) {
      failed = staged[i];
      error = systemError("cannot write");
      staged.erase(staged.begin(), staged.begin() + static_cast<std::ptrdiff_t>(i));
      return false;
    }
  }
  staged.clear();
  return true;
}

bool writeFileAtomically(const std::string &path, const std::vector<FileChunk> &chunks,
                         std::string &error) {
  FileSet set;
  std::string failed;
  return set.stage(path, chunks, error) && set.commit(failed, error);
}

bool canCreate(const std::string &path, std::string &error) {
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
    error = "is a directory";
    return false;
  }
  const std::string temporary = FileSet::stagedName(path);
  int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    error = systemError("cannot write");
    return false;
  }
  ::close(fd);
  std::remove(temporary.c_str());
  return true;
}

bool readFile(const std::string &path, uint64_t limit, std::string &bytes, std::string &error) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = systemError("cannot open");
    return false;
  }
  struct stat info {};
  bool ok = ::fstat(fd, &info) == 0;
  if (!ok)
    error = systemError("cannot read");
  else if (static_cast<uint64_t>(info.st_size) > limit) {
    error = "is " + std::to_string(info.st_size) + " bytes, more than the " +
            std::to_string(limit) + " it may be";
    ok = false;
  }
  if (ok) {
    bytes.resize(static_cast<size_t>(info.st_size));
    size_t done = 0;
    while (ok && done < bytes.size()) {
      ssize_t got = ::read(fd, bytes.data() + done, bytes.size() - done);
      if (got < 0 && errno == EINTR)
        continue;
      if (got <= 0) {
        error = got < 0 ? systemError("cannot read") : "changed size while being read";
        ok = false;
      } else {
        done += static_cast<size_t>(got);
      }
    }
  }
  ::close(fd);
  return ok;
}

} // namespace cleave::rt
